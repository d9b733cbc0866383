"""The clean-shutdown file (seed 001 KIP-966, INVARIANTS rule 12).

At clean shutdown, after the final flush of every log, the broker writes
`<log.dir>/.kafka_cleanshutdown` = JSON `{"version": 0, "BrokerEpoch": N}` (N = -1 if it never
got an epoch). At start it reads the epoch (the registration's PreviousBrokerEpoch), loads its
logs, then removes the file, so a crash after that start counts as unclean. Missing, unreadable
or disagreeing files across log dirs give -1: the controller then treats the restart as unclean.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path

from kafkawire.constants import NO_BROKER_EPOCH
from storage.runtime.fsutil import fsync_dir, storage_errors, write_atomic

CLEAN_SHUTDOWN_FILE_NAME = ".kafka_cleanshutdown"
CLEAN_SHUTDOWN_VERSION = 0

_log = logging.getLogger("minikraft.broker")


class CleanShutdownFile:
    def __init__(self, log_dir: Path, logger: logging.Logger | None = None) -> None:
        self.path = Path(log_dir) / CLEAN_SHUTDOWN_FILE_NAME
        self._logger = logger or _log

    def exists(self) -> bool:
        return self.path.exists()

    def read(self) -> int:
        """The broker epoch written at the last clean shutdown, or -1."""
        try:
            with storage_errors(f"read {self.path}"):
                text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return NO_BROKER_EPOCH
        try:
            body = json.loads(text)
            version = body["version"]
            epoch = body["BrokerEpoch"]
        except (ValueError, TypeError, KeyError) as exc:
            self._logger.warning(
                "Clean shutdown file %s is unreadable (%s): treating the last shutdown as unclean",
                self.path, exc,
            )
            return NO_BROKER_EPOCH
        if version != CLEAN_SHUTDOWN_VERSION or isinstance(epoch, bool):
            self._logger.warning(
                "Clean shutdown file %s has version %r / epoch %r: treating it as unclean",
                self.path, version, epoch,
            )
            return NO_BROKER_EPOCH
        try:
            # KIP-966 shows the epoch as a string; Kafka writes a number. Accept both.
            return int(epoch)
        except (TypeError, ValueError):
            self._logger.warning(
                "Clean shutdown file %s has a bad broker epoch %r: treating it as unclean",
                self.path, epoch,
            )
            return NO_BROKER_EPOCH

    def write(self, broker_epoch: int) -> None:
        """Call after the final flush: atomic and fsync'd (temp, fsync, rename, fsync dir)."""
        body = json.dumps({"version": CLEAN_SHUTDOWN_VERSION, "BrokerEpoch": broker_epoch})
        write_atomic(self.path, body.encode("utf-8"))
        self._logger.info("Wrote clean shutdown file %s with broker epoch %d", self.path,
                          broker_epoch)

    def remove(self) -> bool:
        """Remove it once the logs are loaded; durable, so a later crash reads as unclean."""
        with storage_errors(f"remove {self.path}"):
            try:
                self.path.unlink()
            except FileNotFoundError:
                return False
        fsync_dir(self.path.parent)
        return True


def previous_broker_epoch(log_dirs: Iterable[Path], logger: logging.Logger | None = None) -> int:
    """PreviousBrokerEpoch for registration: the epoch every log dir's file agrees on, else -1
    (Kafka's readBrokerEpochFromCleanShutdownFiles)."""
    logger = logger or _log
    found: int | None = None
    for log_dir in log_dirs:
        handler = CleanShutdownFile(log_dir, logger)
        if not handler.exists():
            logger.info("No clean shutdown file in %s: the last shutdown was unclean", log_dir)
            return NO_BROKER_EPOCH
        epoch = handler.read()
        if epoch == NO_BROKER_EPOCH:
            return NO_BROKER_EPOCH
        if found is not None and epoch != found:
            logger.warning(
                "Clean shutdown files disagree (%d in %s, %d elsewhere): treating it as unclean",
                epoch, log_dir, found,
            )
            return NO_BROKER_EPOCH
        found = epoch
    return NO_BROKER_EPOCH if found is None else found


def write_clean_shutdown(log_dirs: Iterable[Path], broker_epoch: int) -> None:
    for log_dir in log_dirs:
        CleanShutdownFile(log_dir).write(broker_epoch)


def remove_clean_shutdown(log_dirs: Iterable[Path]) -> None:
    for log_dir in log_dirs:
        CleanShutdownFile(log_dir).remove()
