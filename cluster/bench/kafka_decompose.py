"""Where a broker failover's time goes, on either cluster, for `minikraft bench kafka`.

Each kill -9 of a partition leader to the producer's next acknowledgement is split into
  kill -> fenced: the active controller appends the batch fencing the victim (its session ran
      out: broker.session.timeout.ms after the victim's last heartbeat); read afterwards from
      the controllers' metadata logs, the batch's append timestamp;
  fenced -> metadata: a surviving broker's Metadata answer first names a new leader (the
      batch committed, replicated to the broker and replayed), asked every 10 ms;
  metadata -> acked: the producer (librdkafka) learns the new leader and its record is
      acknowledged by a full-enough ISR.
Timestamps are wall-clock milliseconds of one machine (the controllers stamp their batches with
the same clock). Kafka's metadata records are its own binary (api key, version, tagged fields);
minikraft's are its own encoding of the same records (metadata/records.py): each is read its way.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster.client.bootstrap import new_client
from cluster.client.broker_client import metadata
from kafkawire.errors import KafkaError
from metadata.records import (
    BROKER_FLAG_TRUE,
    BrokerRegistrationChangeRecord,
    CorruptRecordError,
    FenceBrokerRecord,
    UnknownRecordError,
    decode_record,
)
from storage.core.record_batch import CorruptBatchError, iter_segment_batches

METADATA_PARTITION = "__cluster_metadata-0"
PROBE_INTERVAL_S = 0.01

# Apache Kafka's metadata record api keys (metadata/src/main/resources/common/metadata/).
_KAFKA_FENCE_BROKER = 7
_KAFKA_BROKER_REGISTRATION_CHANGE = 17
_KAFKA_FENCED_TAG = 0  # BrokerRegistrationChangeRecord.Fenced: 1 fenced, -1 unfenced, 0 none


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def kafka_fenced_broker(value: bytes) -> int | None:
    """The broker a Kafka metadata record fences (BrokerRegistrationChangeRecord with Fenced 1,
    or the older FenceBrokerRecord), else None. Layout: frame version, api key and version
    (unsigned varints), then BrokerId int32, BrokerEpoch int64, then tagged fields."""
    try:
        _frame, pos = _uvarint(value, 0)
        api_key, pos = _uvarint(value, pos)
        _version, pos = _uvarint(value, pos)
        if api_key == _KAFKA_FENCE_BROKER:
            return int(struct.unpack_from(">i", value, pos)[0])
        if api_key != _KAFKA_BROKER_REGISTRATION_CHANGE:
            return None
        broker_id = int(struct.unpack_from(">i", value, pos)[0])
        pos += 4 + 8
        tags, pos = _uvarint(value, pos)
        for _ in range(tags):
            tag, pos = _uvarint(value, pos)
            size, pos = _uvarint(value, pos)
            if tag == _KAFKA_FENCED_TAG and size == 1:
                return broker_id if struct.unpack_from(">b", value, pos)[0] == 1 else None
            pos += size
    except (IndexError, struct.error):
        return None
    return None


def minikraft_fenced_broker(value: bytes) -> int | None:
    try:
        record = decode_record(value)
    except (UnknownRecordError, CorruptRecordError):
        return None
    if isinstance(record, BrokerRegistrationChangeRecord) and record.fenced == BROKER_FLAG_TRUE:
        return record.broker_id
    if isinstance(record, FenceBrokerRecord):
        return record.id
    return None


def fence_times_ms(controller_dirs: list[Path], kafka: bool) -> list[tuple[int, int]]:
    """(append timestamp ms, fenced broker id) of every fencing in the controllers' metadata
    logs, by offset (each batch once, whichever controller holds it)."""
    fenced_broker = kafka_fenced_broker if kafka else minikraft_fenced_broker
    seen: dict[int, list[tuple[int, int]]] = {}
    for directory in controller_dirs:
        for segment in sorted(directory.rglob(f"{METADATA_PARTITION}/*.log")):
            try:
                data = segment.read_bytes()
                for _pos, batch, _size in iter_segment_batches(data):
                    if batch.is_control or batch.base_offset in seen:
                        continue
                    fences = []
                    for record in batch.records:
                        broker = None if record.value is None else fenced_broker(record.value)
                        if broker is not None:
                            fences.append((batch.timestamp_ms, broker))
                    seen[batch.base_offset] = fences
            except (OSError, CorruptBatchError):
                continue  # an active segment's torn tail: what came before it is read
    return sorted(f for fences in seen.values() for f in fences)


@dataclass
class BrokerKill:
    """One broker failover: when the kill happened (wall clock, s) and how long each part took."""

    victim: int
    killed_at: float
    acked_ms: float  # kill -> first acknowledgement of a record produced after the kill
    metadata_ms: float | None = None  # kill -> a surviving broker's Metadata names a new leader
    fenced_ms: float | None = None  # kill -> the controller's fencing batch (from its log)

    def parts(self) -> dict[str, float | None]:
        fenced, meta, acked = self.fenced_ms, self.metadata_ms, self.acked_ms
        return {
            "kill->fenced": fenced,
            "fenced->metadata": None if fenced is None or meta is None else meta - fenced,
            "metadata->acked": None if meta is None else acked - meta,
            "total": acked,
        }


def fill_fenced(kills: list[BrokerKill], fences: list[tuple[int, int]]) -> None:
    """Each kill's first fencing of its victim at or after the kill."""
    for kill in kills:
        after = [ts for ts, broker in fences
                 if broker == kill.victim and ts >= kill.killed_at * 1000 - 5]
        if after:
            kill.fenced_ms = min(after) - kill.killed_at * 1000


class LeaderProbe:
    """Asks a surviving broker for the partition's leader every 10 ms, in a thread, from the
    kill until it names a leader other than the victim: when that broker's metadata moved."""

    def __init__(self, address: str, topic: str, victim: int, deadline_s: float) -> None:
        self.address, self.topic, self.victim = address, topic, victim
        self.deadline = time.time() + deadline_s
        self.seen_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    def __enter__(self) -> LeaderProbe:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    async def _run(self) -> None:
        client = new_client("bench-kafka-probe", request_timeout_ms=1000)
        try:
            while not self._stop.is_set() and time.time() < self.deadline:
                with contextlib.suppress(KafkaError, IndexError):
                    response: Any = await metadata(client, self.address, [self.topic], 1000)
                    leader = int(response.topics[0].partitions[0].leader_id)
                    if leader >= 0 and leader != self.victim:
                        self.seen_at = time.time()
                        return
                await asyncio.sleep(PROBE_INTERVAL_S)
        finally:
            await client.close()
