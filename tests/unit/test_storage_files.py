"""Small storage files on real disk: atomic writes, quorum-state, meta.properties, format/info."""

from __future__ import annotations

import errno
import json
import os
import re
import uuid
from pathlib import Path

import pytest

from kafkawire.constants import ZERO_UUID
from kafkawire.errors import Errors
from raft.core.replica_key import ReplicaKey, uuid_from_str, uuid_to_str
from raft.runtime.meta_properties import (
    AlreadyFormattedError,
    InconsistentClusterIdError,
    MetaProperties,
    UnformattedError,
    ensure_formatted,
    format_directories,
    random_uuid_str,
    read_meta_properties,
    storage_info,
    write_meta_properties,
)
from raft.runtime.quorum_state_file import ElectionStateFile, QuorumStateData
from storage.core.record_batch import CorruptBatchError, encode_batch
from storage.runtime.fsutil import StorageError, storage_errors, write_atomic
from storage.runtime.snapshot_file import list_snapshots, load_snapshot, parse_snapshot_file_name

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


# ---- fsutil ----

def test_write_atomic_replaces_content_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "state"
    write_atomic(target, b"one")
    write_atomic(target, b"two")
    assert target.read_bytes() == b"two"
    assert [p.name for p in tmp_path.iterdir()] == ["state"]


def test_full_disk_becomes_kafka_storage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_space(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", no_space)
    with pytest.raises(StorageError) as caught:
        write_atomic(tmp_path / "quorum-state", b"{}")
    monkeypatch.undo()
    assert caught.value.error == Errors.KAFKA_STORAGE_ERROR
    assert "ENOSPC" in caught.value.message and "quorum-state" in caught.value.message
    assert list(tmp_path.iterdir()) == []  # the temp file was removed
    with pytest.raises(FileNotFoundError), storage_errors("open"):
        (tmp_path / "missing").read_bytes()  # not a disk failure: passes through unchanged


# ---- quorum-state ----

def test_quorum_state_round_trip_in_kafka_names(tmp_path: Path) -> None:
    state_file = ElectionStateFile(tmp_path / "quorum-state")
    assert state_file.read() is None
    directory_id = uuid.uuid4()
    voted = QuorumStateData(epoch=7, leader_id=None, voted_key=ReplicaKey(2, directory_id))
    state_file.write(voted)
    assert state_file.read() == voted
    document = json.loads((tmp_path / "quorum-state").read_text())
    assert document == {
        "leaderId": -1, "leaderEpoch": 7, "votedId": 2,
        "votedDirectoryId": uuid_to_str(directory_id), "dataVersion": 1,
    }
    leader = QuorumStateData(epoch=8, leader_id=3, voted_key=ReplicaKey(1))
    state_file.write(leader)
    assert state_file.read() == leader
    assert json.loads((tmp_path / "quorum-state").read_text())["votedDirectoryId"] is None


def test_quorum_state_reads_kafka_written_file(tmp_path: Path) -> None:
    path = tmp_path / "quorum-state"
    path.write_text('{"clusterId":"","leaderId":1,"leaderEpoch":3,"votedId":-1,'
                    '"appliedOffset":0,"currentVoters":null,"data_version":0}')
    assert ElectionStateFile(path).read() == QuorumStateData(3, 1, None)


@pytest.mark.parametrize(
    "content",
    [
        b'{"leaderId": 1, "leaderEp',
        b'{"leaderId": 1, "votedId": -1, "dataVersion": 1}',
        b'{"leaderId": "1", "leaderEpoch": 2, "votedId": -1, "dataVersion": 1}',
        b'{"leaderId": 1, "leaderEpoch": 2, "votedId": 3, "votedDirectoryId": "nope", '
        b'"dataVersion": 1}',
        b"[1, 2]",
    ],
)
def test_corrupt_quorum_state_is_a_storage_error_naming_the_file(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "quorum-state"
    path.write_bytes(content)
    with pytest.raises(StorageError, match=re.escape(str(path))) as caught:
        ElectionStateFile(path).read()
    assert caught.value.error == Errors.KAFKA_STORAGE_ERROR


# ---- meta.properties ----

def test_meta_properties_round_trip(tmp_path: Path) -> None:
    props = MetaProperties(1, CLUSTER_ID, 3, uuid.uuid4())
    write_meta_properties(tmp_path, props)
    assert read_meta_properties(tmp_path) == props
    text = (tmp_path / "meta.properties").read_text()
    assert f"directory.id={uuid_to_str(props.directory_id)}" in text
    assert "version=1" in text and "node.id=3" in text
    assert read_meta_properties(tmp_path / "nowhere") is None


def test_meta_properties_accepts_storage_id(tmp_path: Path) -> None:
    storage_id = uuid.uuid4()
    (tmp_path / "meta.properties").write_text(
        f"#\n#Thu Jan 01 00:00:00 UTC 2024\nversion=1\ncluster.id={CLUSTER_ID}\nnode.id=2\n"
        f"storage.id={uuid_to_str(storage_id)}\n"
    )
    props = read_meta_properties(tmp_path)
    assert props == MetaProperties(1, CLUSTER_ID, 2, storage_id)


def test_missing_directory_id_gets_one_written_back(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text(f"version=1\ncluster.id={CLUSTER_ID}\nnode.id=4\n")
    first = read_meta_properties(tmp_path)
    assert first is not None and first.directory_id != ZERO_UUID
    assert f"directory.id={uuid_to_str(first.directory_id)}" in (
        tmp_path / "meta.properties"
    ).read_text()
    assert read_meta_properties(tmp_path) == first  # stable from now on


def test_malformed_meta_properties_is_a_storage_error(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text("version=1\nnode.id=x\ncluster.id=c\n")
    with pytest.raises(StorageError, match=r"node\.id"):
        read_meta_properties(tmp_path)


def test_random_uuid_str_is_kafka_form() -> None:
    text = random_uuid_str()
    assert len(text) == 22 and "=" not in text
    assert uuid_to_str(uuid_from_str(text)) == text
    assert random_uuid_str() != text


def test_random_uuid_str_never_starts_with_a_dash() -> None:
    # One in 64 base64url ids starts with '-'; Kafka's Uuid.randomUuid draws again, since
    # `--cluster-id -x...` reads as an option to kafka-storage (and to `minikraft storage`).
    assert not any(random_uuid_str().startswith("-") for _ in range(2000))


# ---- storage format / info ----

def test_format_writes_fresh_ids_partition_dir_and_bootstrap_checkpoint(tmp_path: Path) -> None:
    log_dirs = [tmp_path / "data-a", tmp_path / "data-b"]
    metadata_dir = tmp_path / "metadata"
    metadata_id = uuid.uuid4()
    voters = encode_batch(0, 0, 1, [b"kraft-version", b"voters"], is_control=True)
    results = format_directories(
        1, CLUSTER_ID, log_dirs, metadata_dir, metadata_directory_id=metadata_id,
        ignore_formatted=False, bootstrap_voters_raw_batches=voters,
    )
    assert [r.path for r in results] == [p.absolute() for p in [*log_dirs, metadata_dir]]
    assert all(r.formatted for r in results)
    assert [r.metadata for r in results] == [False, False, True]
    assert results[2].directory_id == metadata_id
    ids = {r.directory_id for r in results}
    assert len(ids) == 3 and ZERO_UUID not in ids
    for result in results:
        assert read_meta_properties(result.path) == MetaProperties(
            1, CLUSTER_ID, 1, result.directory_id
        )
    partition_dir = metadata_dir / "__cluster_metadata-0"
    checkpoint = partition_dir / "00000000000000000000-0000000000.checkpoint"
    assert checkpoint.read_bytes() == voters
    assert parse_snapshot_file_name(checkpoint.name) == (0, 0)
    assert list_snapshots(partition_dir) == [(0, 0)]
    (bootstrap,) = load_snapshot(partition_dir, list_snapshots(partition_dir)[0])
    assert bootstrap.is_control and bootstrap.records[1].value == b"voters"
    assert not (log_dirs[0] / "__cluster_metadata-0").exists()


def test_format_refuses_a_formatted_directory_and_skips_it_when_told(tmp_path: Path) -> None:
    data_dir, metadata_dir = tmp_path / "data", tmp_path / "metadata"
    format_directories(
        1, CLUSTER_ID, [data_dir], metadata_dir, metadata_directory_id=None,
        ignore_formatted=False, bootstrap_voters_raw_batches=None,
    )
    original = read_meta_properties(metadata_dir)
    assert original is not None
    (tmp_path / "new").mkdir()
    with pytest.raises(AlreadyFormattedError, match=re.escape(str(data_dir.absolute()))):
        format_directories(
            1, CLUSTER_ID, [tmp_path / "new", data_dir], metadata_dir,
            metadata_directory_id=None, ignore_formatted=False, bootstrap_voters_raw_batches=None,
        )
    assert not (tmp_path / "new" / "meta.properties").exists()  # refused before writing
    results = format_directories(
        1, CLUSTER_ID, [tmp_path / "new", data_dir], metadata_dir,
        metadata_directory_id=None, ignore_formatted=True, bootstrap_voters_raw_batches=None,
    )
    assert [r.formatted for r in results] == [True, False, False]
    assert read_meta_properties(metadata_dir) == original  # never rewritten
    assert results[2].directory_id == original.directory_id


def test_format_rejects_a_corrupt_bootstrap_snapshot(tmp_path: Path) -> None:
    voters = bytearray(encode_batch(0, 0, 1, [b"voters"], is_control=True))
    voters[-1] ^= 1
    with pytest.raises(CorruptBatchError):
        format_directories(
            1, CLUSTER_ID, [], tmp_path / "metadata", metadata_directory_id=None,
            ignore_formatted=False, bootstrap_voters_raw_batches=bytes(voters),
        )
    assert not (tmp_path / "metadata" / "meta.properties").exists()


def test_storage_info_json_shape(tmp_path: Path) -> None:
    data_dir, metadata_dir = tmp_path / "data", tmp_path / "metadata"
    unformatted = tmp_path / "spare"
    info = storage_info([data_dir], metadata_dir)
    assert info["cluster_id"] is None and info["node_id"] is None
    assert [d["formatted"] for d in info["directories"]] == [False, False]
    results = format_directories(
        5, CLUSTER_ID, [data_dir], metadata_dir, metadata_directory_id=None,
        ignore_formatted=False, bootstrap_voters_raw_batches=None,
    )
    info = storage_info([data_dir, unformatted], metadata_dir)
    assert json.loads(json.dumps(info)) == {
        "cluster_id": CLUSTER_ID,
        "node_id": 5,
        "directories": [
            {"path": str(data_dir.absolute()), "directory_id": uuid_to_str(results[0].directory_id),
             "formatted": True, "metadata": False},
            {"path": str(unformatted.absolute()), "directory_id": None, "formatted": False,
             "metadata": False},
            {"path": str(metadata_dir.absolute()),
             "directory_id": uuid_to_str(results[1].directory_id), "formatted": True,
             "metadata": True},
        ],
    }


def test_ensure_formatted_refuses_unformatted_and_foreign_directories(tmp_path: Path) -> None:
    with pytest.raises(UnformattedError, match="minikraft storage format"):
        ensure_formatted(tmp_path)
    props = MetaProperties(1, CLUSTER_ID, 1, uuid.uuid4())
    write_meta_properties(tmp_path, props)
    assert ensure_formatted(tmp_path, CLUSTER_ID, expected_node_id=1) == props
    with pytest.raises(InconsistentClusterIdError) as caught:
        ensure_formatted(tmp_path, "AnotherClusterIdAAAAAA")
    assert caught.value.error == Errors.INCONSISTENT_CLUSTER_ID
    with pytest.raises(StorageError, match="node id 1"):
        ensure_formatted(tmp_path, CLUSTER_ID, expected_node_id=2)


def test_list_snapshots_skips_a_snapshot_deleted_while_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process's snapshot cleanup may delete a file between the directory listing and
    its read (CI saw FileNotFoundError from a test polling a live controller's directory)."""
    from storage.core.record_batch import encode_batch

    kept = tmp_path / "00000000000000000000-0000000000.checkpoint"
    gone = tmp_path / "00000000000000000010-0000000001.checkpoint"
    for path in (kept, gone):
        path.write_bytes(encode_batch(0, 0, 0, [b"snapshot"]))
    read_bytes = Path.read_bytes

    def deleted_first(self: Path) -> bytes:
        if self == gone:
            self.unlink()
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", deleted_first)
    assert list_snapshots(tmp_path) == [(0, 0)]


def test_listing_snapshots_checks_their_batches_without_decoding_their_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node's start lists its snapshots: each is checked (length, magic, CRC32C), as Kafka's
    ensureValid, not decoded: a 100,000-partition snapshot is 100,000 records, decoded once
    more when it is loaded (issue 35: seconds of a restarted broker's start). A corrupt one is
    still skipped."""
    from storage.core import record_batch
    from storage.core.record_batch import encode_batch

    good = tmp_path / "00000000000000000010-0000000001.checkpoint"
    good.write_bytes(encode_batch(0, 1, 0, [b"a", b"b"]) + encode_batch(2, 1, 0, [b"c"]))
    bad = tmp_path / "00000000000000000020-0000000001.checkpoint"
    data = bytearray(encode_batch(0, 1, 0, [b"d"]))
    data[-1] ^= 0x55
    bad.write_bytes(bytes(data))
    decoded: list[int] = []
    real = record_batch._decode_records

    def counted(*args: object) -> object:
        decoded.append(1)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(record_batch, "_decode_records", counted)
    assert list_snapshots(tmp_path) == [(10, 1)]
    assert decoded == []
