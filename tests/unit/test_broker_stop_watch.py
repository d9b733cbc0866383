"""A broker stop that stalls says after which phase (a SIGKILLed stop leaves no other trace:
the console's ELR scenario once met a broker that hung after its controlled shutdown)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from broker.runtime import broker_node


def test_a_stalled_phase_is_named_and_a_finished_stop_warns_nothing(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(broker_node, "SLOW_PHASE_S", 0.05)

    async def stop(stall_after_first: bool) -> None:
        phases = broker_node._Phases()
        phases.start_watch(102)
        phases.done("controlled shutdown")
        if stall_after_first:
            await asyncio.sleep(0.2)
        phases.done("fetchers and listeners")
        phases.stop_watch()
        await asyncio.sleep(0.1)

    with caplog.at_level(logging.WARNING, logger=broker_node.log.name):
        asyncio.run(stop(stall_after_first=False))
        assert not caplog.records
        asyncio.run(stop(stall_after_first=True))
    assert [r.getMessage() for r in caplog.records] == [
        "Broker 102: shutdown still running 0 s after controlled shutdown"]
