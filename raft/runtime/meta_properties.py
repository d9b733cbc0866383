"""meta.properties and `minikraft storage format` / `storage info` (seed 003, KIP-856).

Each log directory and the metadata log directory holds a Java-properties `meta.properties`:

    version=1
    cluster.id=<22-char id>
    node.id=<int>
    directory.id=<22-char base64url uuid>

The directory id is the storage UUID that makes a replica a ReplicaKey(id, directory_id)
(INVARIANTS rule 4): format gives every directory a fresh one, so a replaced disk comes back as a
new key, an observer until added. Seed 003 calls the key `storage.id`; it is read too. A
formatted file without a directory id gets a new one, written back atomically (seed 003).
Format never rewrites an existing meta.properties (CLI.md).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkawire.constants import ZERO_UUID
from kafkawire.errors import Errors
from kafkawire.uuids import random_directory_id, random_uuid
from raft.core.replica_key import uuid_from_str, uuid_to_str
from storage.runtime.fsutil import StorageError, storage_errors, write_atomic
from storage.runtime.snapshot_file import BOOTSTRAP_SNAPSHOT_ID, write_snapshot

META_PROPERTIES_FILE_NAME = "meta.properties"
METADATA_PARTITION_DIR_NAME = "__cluster_metadata-0"
META_PROPERTIES_VERSION = 1
_FORMAT_COMMAND = "run `minikraft storage format` first"

_log = logging.getLogger(__name__)


class AlreadyFormattedError(StorageError):
    def __init__(self, path: Path) -> None:
        super().__init__(
            f"{path} is already formatted (it has a {META_PROPERTIES_FILE_NAME}); use "
            "--ignore-formatted to skip it"
        )
        self.path = path


class UnformattedError(StorageError):
    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} has no {META_PROPERTIES_FILE_NAME}: {_FORMAT_COMMAND}")
        self.path = path


class InconsistentClusterIdError(StorageError):
    def __init__(self, message: str) -> None:
        super().__init__(message, Errors.INCONSISTENT_CLUSTER_ID)


@dataclass(frozen=True, slots=True)
class MetaProperties:
    version: int
    cluster_id: str
    node_id: int
    directory_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class FormattedDirectory:
    path: Path
    directory_id: uuid.UUID
    formatted: bool  # False: already formatted and skipped (--ignore-formatted)
    metadata: bool


def random_uuid_str() -> str:
    """A fresh UUID as Kafka's `kafka-storage random-uuid` prints it (Uuid.randomUuid): 22
    characters of unpadded base64url, never starting with '-'."""
    return uuid_to_str(random_uuid())


def meta_properties_path(directory: Path) -> Path:
    return Path(directory) / META_PROPERTIES_FILE_NAME


def parse_properties(text: str) -> dict[str, str]:
    """Java properties, the subset Kafka writes: `key=value` lines, `#`/`!` comments."""
    properties: dict[str, str] = {}
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line or line[0] in "#!":
            continue
        separators = [i for i in (line.find("="), line.find(":")) if i >= 0]
        if not separators:
            properties[line] = ""
            continue
        cut = min(separators)
        properties[line[:cut].strip()] = line[cut + 1 :].strip()
    return properties


def encode_meta_properties(props: MetaProperties) -> bytes:
    lines = [
        "#",
        "# Written by minikraft; never edit by hand (seed 003)",
        f"cluster.id={props.cluster_id}",
        f"directory.id={uuid_to_str(props.directory_id)}",
        f"node.id={props.node_id}",
        f"version={props.version}",
    ]
    return ("\n".join(lines) + "\n").encode("utf-8")


def write_meta_properties(directory: Path, props: MetaProperties) -> None:
    write_atomic(meta_properties_path(directory), encode_meta_properties(props))


def read_meta_properties(
    directory: Path, *, logger: logging.Logger | None = None
) -> MetaProperties | None:
    """The directory's meta.properties, or None if it has none. A file without a directory id
    gets a fresh one, written back atomically (seed 003). Malformed: StorageError."""
    path = meta_properties_path(directory)
    try:
        with storage_errors(f"read {path}"):
            text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise StorageError(f"corrupt {path}: not UTF-8 text") from exc
    properties = parse_properties(text)
    version = _int_property(properties, "version", path)
    if version != META_PROPERTIES_VERSION:
        raise StorageError(f"{path}: unsupported meta.properties version {version}")
    cluster_id = properties.get("cluster.id", "")
    if not cluster_id:
        raise StorageError(f"corrupt {path}: no cluster.id")
    node_id = _int_property(properties, "node.id", path)
    raw_directory = properties.get("directory.id") or properties.get("storage.id")
    directory_id = ZERO_UUID
    if raw_directory:
        try:
            directory_id = uuid_from_str(raw_directory)
        except ValueError as exc:
            raise StorageError(f"corrupt {path}: bad directory.id {raw_directory!r}") from exc
    props = MetaProperties(version, cluster_id, node_id, directory_id)
    if directory_id == ZERO_UUID:
        props = MetaProperties(version, cluster_id, node_id, random_directory_id())
        write_meta_properties(directory, props)
        (logger or _log).info(
            "%s had no directory id: assigned %s (seed 003)", path, uuid_to_str(props.directory_id)
        )
    return props


def _int_property(properties: dict[str, str], key: str, path: Path) -> int:
    value = properties.get(key)
    if value is None:
        raise StorageError(f"corrupt {path}: no {key}")
    try:
        return int(value)
    except ValueError as exc:
        raise StorageError(f"corrupt {path}: {key}={value!r} is not an integer") from exc


def _validate_cluster_id(cluster_id: str) -> None:
    if not cluster_id or any(ch.isspace() or ch in "=:#!\\" for ch in cluster_id):
        raise ValueError(f"invalid cluster id {cluster_id!r}")


def _unique_directories(log_dirs: list[Path], metadata_log_dir: Path) -> list[Path]:
    seen: dict[Path, None] = {}
    for directory in [*log_dirs, metadata_log_dir]:
        seen.setdefault(Path(directory).absolute(), None)
    return list(seen)


def format_directories(
    node_id: int,
    cluster_id: str,
    log_dirs: list[Path],
    metadata_log_dir: Path,
    *,
    metadata_directory_id: uuid.UUID | None,
    ignore_formatted: bool,
    bootstrap_voters_raw_batches: bytes | None,
) -> list[FormattedDirectory]:
    """`minikraft storage format`: a meta.properties with its own fresh directory id in every
    directory (the metadata directory takes metadata_directory_id if given, the id named in
    --initial-controllers), `__cluster_metadata-0/`, and the bootstrap checkpoint 0-0 holding
    the voter set when given. Every directory is checked before any is written, so a refused
    format changes nothing."""
    _validate_cluster_id(cluster_id)
    if node_id < 0:
        raise ValueError(f"invalid node id {node_id}")
    if metadata_directory_id == ZERO_UUID:
        raise ValueError("the metadata directory id must not be the zero UUID")
    metadata_dir = Path(metadata_log_dir).absolute()
    directories = _unique_directories(log_dirs, metadata_log_dir)
    existing: dict[Path, MetaProperties] = {}
    for directory in directories:
        if meta_properties_path(directory).exists():
            if not ignore_formatted:
                raise AlreadyFormattedError(directory)
            props = read_meta_properties(directory)
            if props is not None:
                existing[directory] = props
    results: list[FormattedDirectory] = []
    for directory in directories:
        is_metadata = directory == metadata_dir
        if directory in existing:
            results.append(
                FormattedDirectory(directory, existing[directory].directory_id, False, is_metadata)
            )
            continue
        with storage_errors(f"create {directory}"):
            directory.mkdir(parents=True, exist_ok=True)
        directory_id = random_directory_id()
        if is_metadata:
            if metadata_directory_id is not None:
                directory_id = metadata_directory_id
            partition_dir = directory / METADATA_PARTITION_DIR_NAME
            with storage_errors(f"create {partition_dir}"):
                partition_dir.mkdir(exist_ok=True)
            if bootstrap_voters_raw_batches is not None:
                write_snapshot(partition_dir, BOOTSTRAP_SNAPSHOT_ID, bootstrap_voters_raw_batches)
        # meta.properties last: its presence means the directory is completely formatted.
        write_meta_properties(
            directory, MetaProperties(META_PROPERTIES_VERSION, cluster_id, node_id, directory_id)
        )
        results.append(FormattedDirectory(directory, directory_id, True, is_metadata))
    return results


def storage_info(log_dirs: list[Path], metadata_log_dir: Path) -> dict[str, Any]:
    """`minikraft storage info --output json` (CLI.md). Directories that disagree on the
    cluster or node id raise InconsistentClusterIdError / StorageError."""
    metadata_dir = Path(metadata_log_dir).absolute()
    cluster_id: str | None = None
    node_id: int | None = None
    entries: list[dict[str, Any]] = []
    for directory in _unique_directories(log_dirs, metadata_log_dir):
        props = read_meta_properties(directory)
        if props is not None:
            if cluster_id is not None and props.cluster_id != cluster_id:
                raise InconsistentClusterIdError(
                    f"{directory} has cluster id {props.cluster_id}, other directories {cluster_id}"
                )
            if node_id is not None and props.node_id != node_id:
                raise StorageError(
                    f"{directory} has node id {props.node_id}, other directories {node_id}"
                )
            cluster_id, node_id = props.cluster_id, props.node_id
        entries.append(
            {
                "path": str(directory),
                "directory_id": None if props is None else uuid_to_str(props.directory_id),
                "formatted": props is not None,
                "metadata": directory == metadata_dir,
            }
        )
    return {"cluster_id": cluster_id, "node_id": node_id, "directories": entries}


def ensure_formatted(
    directory: Path,
    expected_cluster_id: str | None = None,
    *,
    expected_node_id: int | None = None,
    cluster_id_source: str = "this node",
) -> MetaProperties:
    """The start-up check: refuse an unformatted directory, another cluster's, or another
    node's (seed 003: never silently start on a wiped metadata directory)."""
    props = read_meta_properties(directory)
    if props is None:
        raise UnformattedError(Path(directory))
    if expected_cluster_id is not None and props.cluster_id != expected_cluster_id:
        raise InconsistentClusterIdError(
            f"{meta_properties_path(directory)} has cluster id {props.cluster_id}, but "
            f"{cluster_id_source} has cluster id {expected_cluster_id}: refusing to start"
        )
    if expected_node_id is not None and props.node_id != expected_node_id:
        raise StorageError(
            f"{meta_properties_path(directory)} has node id {props.node_id}, but this node is "
            f"{expected_node_id} (node.id): refusing to start"
        )
    return props


def ensure_storage_identity(
    metadata_log_dir: Path, log_dirs: list[Path], node_id: int
) -> tuple[MetaProperties, list[MetaProperties]]:
    """Seed 003: every meta.properties a process opens, the metadata directory's and each log
    directory's, is formatted, names this node's id and one cluster id (the metadata
    directory's); a mismatch names the directory and both ids. Returns (metadata, log dirs)."""
    metadata = ensure_formatted(metadata_log_dir, expected_node_id=node_id)
    source = str(meta_properties_path(metadata_log_dir))
    log_metas = [
        ensure_formatted(d, metadata.cluster_id, expected_node_id=node_id, cluster_id_source=source)
        for d in log_dirs
    ]
    return metadata, log_metas
