"""kafkawire.loop: the uvloop runner and the signal-driven life of a node process."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from kafkawire.loop import run, serve_until_signalled


def test_run_uses_uvloop_and_leaves_the_policy_alone() -> None:
    policy = asyncio.get_event_loop_policy()

    async def loop_module() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert run(loop_module()).startswith("uvloop")
    assert asyncio.get_event_loop_policy() is policy


def test_sigterm_stops_a_started_node_after_start() -> None:
    calls: list[str] = []

    async def start() -> None:
        calls.append("start")
        asyncio.get_running_loop().call_later(0.05, os.kill, os.getpid(), signal.SIGTERM)

    async def stop() -> None:
        calls.append("stop")

    run(asyncio.wait_for(serve_until_signalled(start, stop, asyncio.Event()), timeout=10))
    assert calls == ["start", "stop"]


def test_stop_runs_even_when_start_has_begun_and_the_wait_is_cancelled() -> None:
    calls: list[str] = []

    async def start() -> None:
        calls.append("start")

    async def stop() -> None:
        calls.append("stop")

    async def main() -> None:
        task = asyncio.ensure_future(serve_until_signalled(start, stop, asyncio.Event()))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main())
    assert calls == ["start", "stop"]
