"""Fixtures shared by the unit tests of more than one module."""

from __future__ import annotations

import pytest

from broker.runtime import event_journal


@pytest.fixture
def journal_writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the broker event journal's writes, in order, as the test makes them (the
    writes still happen)."""
    writes: list[int] = []
    real = event_journal.write_all

    def counted(fd: int, data: bytes) -> None:
        writes.append(len(data))
        real(fd, data)

    monkeypatch.setattr(event_journal, "write_all", counted)
    return writes
