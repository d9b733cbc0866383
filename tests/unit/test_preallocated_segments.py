"""`log.preallocate` (storage/runtime/segment.py): a segment is extended ahead of its appends; the
zeros past its last batch are free space to the log itself on reopen, to the tools and to the
audit, never damage; a torn batch inside that space is still a torn tail (rule 2); a rolled or
closed segment gives the space back."""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from analytics.read.broker_inputs import PartitionLogFile, iter_partition_log_rows
from analytics.read.log_scan import TORN, Damage, walk_batches
from cluster.cli.dump_log_cmd import dump_file
from kafkawire.config import ConfigError, NodeConfig
from storage.core.record_batch import encode_batch, is_free_tail, iter_segment_batches
from storage.runtime.disk_log import PREALLOCATE_STEP_BYTES, DiskLog
from storage.runtime.log_reader import SegmentProblem, read_batches
from storage.runtime.power_loss import POWER_LOSS_SIM

REPO = Path(__file__).resolve().parents[2]
FIRST = "00000000000000000000.log"


def fill(log: DiskLog, batches: int, epoch: int = 1) -> None:
    for i in range(batches):
        log.append_as_leader([b"e%db%d-%d" % (epoch, i, r) for r in range(3)], epoch, 1_000 + i)


def batch_bytes(log: DiskLog) -> int:
    return len(log.read(log.start_offset(), 1 << 30))


def killed_writer(directory: Path, body: str) -> None:
    """Run body against a preallocating DiskLog in a child process and SIGKILL it there: the
    file keeps the preallocated size a crash leaves (no close, no trim)."""
    script = textwrap.dedent(
        f"""
        import os, signal
        from storage.runtime.disk_log import DiskLog
        log = DiskLog({str(directory)!r}, preallocate=True)
        """
    ) + textwrap.dedent(body) + "\nos.kill(os.getpid(), signal.SIGKILL)\n"
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, timeout=30)
    assert done.returncode == -signal.SIGKILL


def killed_after_appends(directory: Path, count: int) -> None:
    """killed_writer after `count` one-record batches (values v0, v1, ...), flushed."""
    killed_writer(directory, f"for i in range({count}):\n"
                             "    log.append_as_leader([b'v%d' % i], 1, 0)\nlog.flush()\n")


def test_is_free_tail_accepts_only_zeros_to_the_end() -> None:
    batch = encode_batch(0, 1, 1000, [b"v"])
    assert is_free_tail(batch + bytes(100), len(batch))
    assert is_free_tail(batch, len(batch))  # nothing left is no damage either
    assert not is_free_tail(batch + bytes(100) + b"\x01", len(batch))
    assert not is_free_tail(batch, 0)


def test_the_active_segment_grows_in_steps_and_close_trims_it(tmp_path: Path) -> None:
    log = DiskLog(tmp_path, preallocate=True)
    fill(log, 3)
    log.flush()
    path = tmp_path / FIRST
    logical = batch_bytes(log)
    assert path.stat().st_size == PREALLOCATE_STEP_BYTES > logical
    log.close()
    assert path.stat().st_size == logical
    with DiskLog(tmp_path, preallocate=True) as reopened:
        assert reopened.end_offset() == 9


def test_without_preallocate_the_file_is_its_batches(tmp_path: Path) -> None:
    with DiskLog(tmp_path) as log:
        fill(log, 3)
        log.flush()
        assert (tmp_path / FIRST).stat().st_size == batch_bytes(log)


def test_a_roll_trims_the_sealed_segment(tmp_path: Path) -> None:
    log = DiskLog(tmp_path, segment_bytes=400, preallocate=True)
    fill(log, 12)
    log.flush()
    paths = log.segment_paths()
    assert len(paths) > 2
    for path in paths[:-1]:
        batches = list(iter_segment_batches(path.read_bytes()))
        assert batches and path.stat().st_size == sum(size for _p, _b, size in batches)
    # The active one is extended by a step no larger than a segment.
    assert paths[-1].stat().st_size == 400
    log.close()


def test_a_killed_writer_leaves_free_space_that_reopening_trims(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    killed_after_appends(tmp_path, 5)
    path = tmp_path / FIRST
    assert path.stat().st_size == PREALLOCATE_STEP_BYTES
    # Tools and the audit read the crashed file as it is: five batches, no damage.
    data = path.read_bytes()
    assert [batch.base_offset for _p, batch, _s in iter_segment_batches(data)] == [0, 1, 2, 3, 4]
    assert [item for item in walk_batches(data, log_end=True) if isinstance(item, Damage)] == []
    problems: list[SegmentProblem] = []
    assert len(list(read_batches(tmp_path, problems))) == 5 and problems == []
    assert [line["offset"] for line in dump_file(path, decode=False)] == [0, 1, 2, 3, 4]
    rows = list(iter_partition_log_rows(PartitionLogFile(1, "t", 0, str(path))))
    assert [row[5] for row in rows] == [0, 1, 2, 3, 4] and not any(row[8] for row in rows)

    with caplog.at_level(logging.WARNING):
        reopened = DiskLog(tmp_path, preallocate=True)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # nothing was lost
    assert reopened.end_offset() == 5
    assert path.stat().st_size == batch_bytes(reopened)
    reopened.append_as_leader([b"after"], 1, 0)
    reopened.close()
    with DiskLog(tmp_path) as plain:
        assert plain.end_offset() == 6


def test_a_torn_batch_in_the_free_space_is_still_a_torn_tail(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    killed_after_appends(tmp_path, 3)
    path = tmp_path / FIRST
    good = sum(size for _p, _b, size in iter_segment_batches(path.read_bytes()))
    torn = encode_batch(3, 1, 0, [b"x" * 200])[:90]  # a crash mid-write: header, part of the body
    with path.open("r+b") as handle:
        handle.seek(good)
        handle.write(torn)
    data = path.read_bytes()
    (damage,) = [item for item in walk_batches(data, log_end=True) if isinstance(item, Damage)]
    assert damage.kind == TORN and damage.position == good

    with caplog.at_level(logging.WARNING):
        reopened = DiskLog(tmp_path, preallocate=True)
    warnings = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert f"at byte {good}" in warnings
    assert reopened.end_offset() == 3 and path.stat().st_size == good
    reopened.close()


def test_free_space_left_in_a_sealed_segment_keeps_the_later_ones(tmp_path: Path) -> None:
    """A power cut can lose a roll's trim: the sealed segment ends in zeros. That is free space,
    so recovery keeps every later segment (a torn tail there would drop them)."""
    log = DiskLog(tmp_path, segment_bytes=400, preallocate=True)
    fill(log, 12)
    log.flush()
    end = log.end_offset()
    first = log.segment_paths()[0]
    log.close()
    with first.open("r+b") as handle:
        handle.truncate(first.stat().st_size + 300)
    data = first.read_bytes()
    assert [item for item in walk_batches(data, log_end=False) if isinstance(item, Damage)] == []
    with DiskLog(tmp_path, segment_bytes=400, preallocate=True) as reopened:
        assert reopened.end_offset() == end
        assert first.stat().st_size == len(data) - 300


def test_power_loss_sim_loses_the_unflushed_appends_with_preallocation(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import os, signal
        from storage.runtime.disk_log import DiskLog
        log = DiskLog({str(tmp_path)!r}, disk_mode={POWER_LOSS_SIM!r}, segment_bytes=300,
                      preallocate=True)
        for i in range(6):
            log.append_as_leader([b"synced-%d" % i], 1, 0)
        log.flush()
        for i in range(4):
            log.append_as_leader([b"held-%d" % i], 2, 0)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, timeout=30)
    assert done.returncode == -signal.SIGKILL
    with DiskLog(tmp_path) as reopened:
        assert reopened.end_offset() == 6
        values = [r.value for b in reopened.read_committed(0, 6) for r in b.records]
        assert values == [b"synced-%d" % i for i in range(6)]


def test_truncation_keeps_appending_at_the_cut(tmp_path: Path) -> None:
    with DiskLog(tmp_path, preallocate=True) as log:
        fill(log, 4)
        log.truncate_to(6)
        assert (tmp_path / FIRST).stat().st_size == batch_bytes(log)
        fill(log, 1, epoch=2)
        log.flush()
        assert [b.base_offset for b in log.read_committed(0, 9)] == [0, 3, 6]
    with DiskLog(tmp_path) as reopened:
        assert reopened.end_offset() == 9 and reopened.last_fetched_epoch() == 2


def test_log_preallocate_must_be_true_or_false() -> None:
    base = {"node.id": "1", "process.roles": "broker", "log.dirs": "/tmp/unused",
            "listeners": "PLAINTEXT://127.0.0.1:0"}
    assert NodeConfig.from_props({**base, "log.preallocate": "TRUE"}).get_bool("log.preallocate")
    assert not NodeConfig.from_props(base).get_bool("log.preallocate")
    config = NodeConfig.from_props({**base, "log.preallocate": "yes"})
    with pytest.raises(ConfigError, match=r"log\.preallocate must be true or false, got 'yes'"):
        config.get_bool("log.preallocate")


def test_the_file_descriptor_is_not_in_append_mode(tmp_path: Path) -> None:
    """pwrite at the segment's end needs a plain descriptor: on Linux, O_APPEND makes pwrite
    ignore its position and write at the file's end, past the free space."""
    with DiskLog(tmp_path, preallocate=True) as log:
        fill(log, 1)
        segment = log._segments[-1]
        assert not fcntl.fcntl(segment._fd, fcntl.F_GETFL) & os.O_APPEND
