"""Metadata records as a MetadataLoader is handed them: one record batch v2 at a base offset and
leader epoch, encoded and read back (a commit, or a snapshot's batches)."""

from __future__ import annotations

from collections.abc import Iterable

from metadata.records import MetadataRecord, encode_record
from storage.core.record_batch import RecordBatch, encode_batch, iter_batches


def batches(base_offset: int, epoch: int, records: Iterable[MetadataRecord]) -> list[RecordBatch]:
    raw = encode_batch(base_offset, epoch, 0, [encode_record(r) for r in records])
    return [batch for batch, _ in iter_batches(raw)]
