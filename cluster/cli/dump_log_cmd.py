"""`minikraft dump-log --files F [F...] [--cluster-metadata-decoder]`: one JSON line per record
of log segments and snapshots, decoded with the same code that wrote them."""

from __future__ import annotations

import base64
import dataclasses
import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from cluster.output import EXIT_FAILED, EXIT_USAGE, fail
from metadata.records import (
    CorruptRecordError,
    UnknownRecordError,
    decode_record,
    record_to_json,
)
from raft.core.control_records import control_version, decode_control
from raft.core.replica_key import uuid_to_str
from storage.core.compression import CODEC_NAMES
from storage.core.record_batch import (
    TIMESTAMP_TYPE_FLAG,
    CorruptBatchError,
    Record,
    iter_segment_batches,
)


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, uuid.UUID):
        return uuid_to_str(value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # ReplicaKey
        return {k: _jsonable(v) for k, v in zip(value._fields, value, strict=True)}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _decode(raw: Record, is_control: bool) -> tuple[str, int | None, Any]:
    if is_control:
        record = decode_control(raw)
        return type(record).__name__, control_version(raw.value), _jsonable(record)
    decoded = decode_record(raw.value or b"")
    return type(decoded).__name__, type(decoded).VERSION, record_to_json(decoded)


def dump_file(path: Path, decode: bool) -> Iterator[dict[str, Any]]:
    """Every record of one file as a dict; raises CorruptBatchError at a bad batch."""
    for _position, batch, _size in iter_segment_batches(path.read_bytes()):
        for index, record in enumerate(batch.records):
            log_append_time = bool(batch.attributes & TIMESTAMP_TYPE_FLAG)
            line: dict[str, Any] = {
                "offset": batch.offset_of(index),
                "epoch": batch.leader_epoch,
                "timestamp_ms": batch.timestamp_ms,
                # Kafka's DumpLogSegments: the batch's codec and the record's timestamp by type
                # (a LogAppendTime batch's records all carry its max timestamp).
                "compresscodec": CODEC_NAMES.get(batch.compression, str(batch.compression)),
                "timestamp_type": "LogAppendTime" if log_append_time else "CreateTime",
                "record_timestamp_ms": batch.max_timestamp_ms
                if log_append_time
                else batch.timestamp_of(index),
            }
            if decode:
                try:
                    line["type"], line["version"], line["data"] = _decode(
                        record, batch.is_control
                    )
                except (CorruptRecordError, UnknownRecordError, ValueError) as exc:
                    line["type"], line["version"] = "Undecodable", None
                    line["data"] = {"error": str(exc)}
            else:
                line["type"] = "control" if batch.is_control else "data"
                line["version"] = None
                line["data"] = (None if record.value is None
                                else base64.b64encode(record.value).decode("ascii"))
            yield line


@click.command("dump-log")
@click.option(
    "--files", "first", required=True, help="log segments (.log) or snapshots (.checkpoint)"
)
@click.argument("more", nargs=-1)
@click.option(
    "--cluster-metadata-decoder", is_flag=True, help="decode metadata and control records"
)
def dump_log(first: str, more: tuple[str, ...], cluster_metadata_decoder: bool) -> None:
    """Print every record of the given files as JSON lines."""
    failed = False
    for name in (first, *more):
        path = Path(name)
        if not path.is_file():
            fail(f"{name}: no such file", EXIT_USAGE)
        try:
            for line in dump_file(path, cluster_metadata_decoder):
                sys.stdout.write(json.dumps(line, default=str) + "\n")
        except CorruptBatchError as exc:
            failed = True
            print(f"error: {name}: CORRUPT_MESSAGE: {exc}", file=sys.stderr)
    sys.stdout.flush()
    if failed:
        sys.exit(EXIT_FAILED)
