"""The `quorum-state` file: the replica's epoch, known leader and vote, in Kafka's JSON names.

    {"leaderId": 1, "leaderEpoch": 7, "votedId": -1, "votedDirectoryId": null, "dataVersion": 1}

It is replaced atomically and fsync'd before any vote or leadership claim leaves the node
(INVARIANTS rule 1: at most one vote per epoch, epochs never decrease across restarts). The vote
names the candidate's directory id too (seed 003, KIP-856 VotedUuid).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from kafkawire.constants import ZERO_UUID
from raft.core.quorum_state import ElectionState
from raft.core.replica_key import ReplicaKey, uuid_from_str, uuid_to_str
from storage.runtime.fsutil import StorageError, storage_errors, write_atomic

QUORUM_STATE_FILE_NAME = "quorum-state"
DATA_VERSION = 1


# The file's content is exactly the core's ElectionState (epoch, leader_id, voted_key): one frozen
# dataclass, so what the core asks to persist is what read() hands back to it.
QuorumStateData = ElectionState


class ElectionStateFields(Protocol):
    """What write() needs: any value with the ElectionState fields."""

    @property
    def epoch(self) -> int: ...

    @property
    def leader_id(self) -> int | None: ...

    @property
    def voted_key(self) -> ReplicaKey | None: ...


def encode_quorum_state(data: ElectionStateFields) -> bytes:
    voted = data.voted_key
    document = {
        "leaderId": -1 if data.leader_id is None else data.leader_id,
        "leaderEpoch": data.epoch,
        "votedId": -1 if voted is None else voted.id,
        "votedDirectoryId": (
            None if voted is None or voted.directory_id == ZERO_UUID
            else uuid_to_str(voted.directory_id)
        ),
        "dataVersion": DATA_VERSION,
    }
    return (json.dumps(document) + "\n").encode("utf-8")


def decode_quorum_state(raw: bytes, source: str) -> QuorumStateData:
    """Parse the file's bytes; anything malformed is a StorageError naming the file."""
    try:
        document: Any = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StorageError(f"corrupt quorum-state file {source}: not JSON ({exc})") from exc
    if not isinstance(document, dict):
        raise StorageError(f"corrupt quorum-state file {source}: not a JSON object")
    # Kafka itself writes "data_version"; accept both spellings.
    version = document.get("dataVersion", document.get("data_version", 0))
    if version not in (0, 1):
        raise StorageError(f"quorum-state file {source}: unsupported data version {version!r}")
    leader_id = _int_field(document, "leaderId", source)
    epoch = _int_field(document, "leaderEpoch", source)
    voted_id = _int_field(document, "votedId", source)
    if epoch < 0:
        raise StorageError(f"corrupt quorum-state file {source}: negative leaderEpoch {epoch}")
    raw_directory = document.get("votedDirectoryId")
    directory_id = ZERO_UUID
    if raw_directory is not None:
        try:
            directory_id = uuid_from_str(str(raw_directory))
        except ValueError as exc:
            raise StorageError(
                f"corrupt quorum-state file {source}: bad votedDirectoryId {raw_directory!r}"
            ) from exc
    return QuorumStateData(
        epoch=epoch,
        leader_id=None if leader_id < 0 else leader_id,
        voted_key=None if voted_id < 0 else ReplicaKey(voted_id, directory_id),
    )


def _int_field(document: dict[str, Any], name: str, source: str) -> int:
    value = document.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise StorageError(f"corrupt quorum-state file {source}: {name} is {value!r}, not an int")
    return value


class ElectionStateFile:
    """Reads and durably writes one quorum-state file."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def read(self) -> QuorumStateData | None:
        """The stored state, or None if the file does not exist yet (a new replica)."""
        try:
            with storage_errors(f"read {self.path}"):
                raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        return decode_quorum_state(raw, str(self.path))

    def write(self, data: ElectionStateFields) -> None:
        """Atomic and fsync'd: durable before the caller sends its vote (rule 1)."""
        write_atomic(self.path, encode_quorum_state(data))
