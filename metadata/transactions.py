"""KIP-868 metadata transactions for the readers of the log other than the MetadataLoader (the
audit's replay and its record tables, the console's replay, chaos's election scan): the loader's
rule (metadata/loader.py, after Kafka's MetadataBatchLoader) over whatever a reader keeps per
record. What follows a BeginTransactionRecord is held and applied only at its
EndTransactionRecord, in log order; an AbortTransactionRecord drops it; a transaction still open
where the reading stops (the end of the log, or a snapshot loaded in its place) is not applied.
A marker out of place (an End or Abort with none open, a Begin inside one) is ignored, as the
loader ignores it. Pure."""

from __future__ import annotations

from typing import Generic, TypeVar

from metadata.records import (
    AbortTransactionRecord,
    BeginTransactionRecord,
    EndTransactionRecord,
)

BEGIN = BeginTransactionRecord.__name__
END = EndTransactionRecord.__name__
ABORT = AbortTransactionRecord.__name__
MARKER_NAMES = frozenset((BEGIN, END, ABORT))
TO_LOG_END = 2**63 - 1  # the last offset of a range that runs to wherever the log ends

# A marker's value starts with msgpack's `[type_id, ...]` (metadata.records.encode_record): a
# fixarray of 3, then the type id as a positive fixint. Lets a reader that decodes only some
# records find the markers among the rest without decoding them.
_FIXARRAY_3 = 0x93
MARKER_TYPE_IDS = {cls.TYPE_ID: cls.__name__ for cls in
                   (BeginTransactionRecord, EndTransactionRecord, AbortTransactionRecord)}

T = TypeVar("T")


def marker_name(value: bytes | None) -> str | None:
    """The marker's type name if a record's value is a transaction marker, else None (from its
    first two bytes: no decoding)."""
    if value is None or len(value) < 2 or value[0] != _FIXARRAY_3:
        return None
    return MARKER_TYPE_IDS.get(value[1])


class TransactionHold(Generic[T]):
    """One reader's view of the transactions of one log, read in log order: `hold` an item a
    record gives (True: a transaction is open, keep it for later), `marker` for each marker
    (what an End releases, to apply now), `clear` where the reading stops or a snapshot is
    loaded. `dropped` lists the (first, last) offsets of every transaction never applied."""

    def __init__(self) -> None:
        self._held: list[T] | None = None
        self.begin_offset = -1
        self.dropped: list[tuple[int, int]] = []

    @property
    def open(self) -> bool:
        return self._held is not None

    def hold(self, item: T) -> bool:
        if self._held is None:
            return False
        self._held.append(item)
        return True

    def marker(self, name: str, offset: int) -> list[T]:
        """A marker (its record type's name) at `offset`: the items an End releases, in log
        order; nothing for a Begin, an Abort (its items are dropped) or a marker out of place."""
        if name == BEGIN:
            if self._held is None:
                self._held, self.begin_offset = [], offset
            return []
        held = self._held
        if held is None or name not in (END, ABORT):
            return []
        self._held = None
        if name == END:
            return held
        self.dropped.append((self.begin_offset, offset))
        return []

    def clear(self, last_offset: int = TO_LOG_END) -> int:
        """The reading stops (or a snapshot replaces what was read): an open transaction is
        dropped, up to `last_offset`. How many items it held."""
        held = self._held
        if held is None:
            return 0
        self._held = None
        self.dropped.append((self.begin_offset, last_offset))
        return len(held)
