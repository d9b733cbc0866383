"""Durable file writes: temp file, fsync, rename, fsync the directory.

Every small state file (quorum-state, meta.properties, snapshots) goes through write_atomic, so a
crash leaves either the old or the new content, never a torn file; quorum-state must be durable
before a vote or a leadership claim is sent (INVARIANTS rule 1).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

from kafkawire.errors import Errors, KafkaError

# A failing disk (or a full one) reports these; Kafka takes the log directory offline on them.
_STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EIO, errno.EROFS, errno.EDQUOT})

TEMP_SUFFIX = ".tmp"


class StorageError(KafkaError):
    """A log directory could not be read or written (Kafka's KAFKA_STORAGE_ERROR, 56)."""

    def __init__(self, message: str, error: Errors = Errors.KAFKA_STORAGE_ERROR) -> None:
        super().__init__(error, message)


def storage_error_from(exc: OSError, action: str) -> StorageError:
    """A StorageError that says what was being done and the OS reason (ENOSPC, EIO, ...)."""
    name = errno.errorcode.get(exc.errno or 0, "OSError")
    where = f" {exc.filename}" if exc.filename else ""
    return StorageError(f"{action} failed{where}: {name} ({exc.strerror})")


def raise_storage_error(exc: OSError, action: str) -> NoReturn:
    """Re-raise an OSError, as a StorageError naming the action if it is a full or failing
    disk. The hot paths (segment writes and fsyncs) call this from a plain `except`, so the
    message is built only on failure."""
    if exc.errno in _STORAGE_ERRNOS:
        raise storage_error_from(exc, action) from exc
    raise exc


@contextlib.contextmanager
def storage_errors(action: str) -> Iterator[None]:
    """Turn a full or failing disk into a StorageError naming the action; other OSErrors pass."""
    try:
        yield
    except OSError as exc:
        raise_storage_error(exc, action)


def fsync_dir(path: Path) -> None:
    """fsync a directory so a create, rename or unlink inside it survives a crash."""
    with storage_errors(f"fsync of directory {path}"):
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_all(fd: int, data: bytes | memoryview) -> None:
    """os.write until every byte is written (a write may be partial)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def pwrite_all(fd: int, data: bytes | memoryview, position: int) -> None:
    """os.pwrite at position until every byte is written (a write may be partial)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written


def temp_path_for(path: Path) -> Path:
    """A unique hidden temp file next to path, so the rename stays inside one file system."""
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}{TEMP_SUFFIX}")


def write_atomic(path: Path, data: bytes) -> None:
    """Replace path with data durably: temp file, fsync, rename over, fsync the directory."""
    path = Path(path)
    temp = temp_path_for(path)
    with storage_errors(f"atomic write of {path}"):
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                temp.unlink()
            raise
        fsync_dir(path.parent)


def remove_stale_temp_files(directory: Path, name_contains: str = "") -> list[Path]:
    """Delete temp files an interrupted write_atomic left behind; returns what was removed."""
    removed = []
    for entry in directory.iterdir():
        name = entry.name
        if name.startswith(".") and name.endswith(TEMP_SUFFIX) and name_contains in name:
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()
                removed.append(entry)
    return removed
