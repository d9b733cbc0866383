"""`minikraft.disk.mode=power-loss-sim` (storage/runtime/power_loss.py): a kill -9 loses exactly the
appends no fsync covered; the node reads its own unflushed appends as usual; a clean close keeps
them; truncation inside the held tail never touches the file (rule 2)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cluster.launch.node_entrypoint import load_node_config
from kafkawire.config import ConfigError, render_properties
from storage.core.record_batch import decode_batch
from storage.runtime import power_loss
from storage.runtime.disk_log import DiskLog
from storage.runtime.power_loss import POWER_LOSS_SIM, HeldSegment, check_disk_mode

REPO = Path(__file__).resolve().parents[2]


def values(log: DiskLog) -> list[bytes]:
    out: list[bytes] = []
    raw = log.read(log.start_offset(), 1 << 20)
    position = 0
    while position < len(raw):
        batch, size = decode_batch(raw, position)
        out.extend(r.value or b"" for r in batch.records)
        position += size
    return out


def test_kill_9_loses_exactly_what_was_not_fsynced(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import os, signal
        from storage.runtime.disk_log import DiskLog
        log = DiskLog({str(tmp_path)!r}, disk_mode="power-loss-sim", segment_bytes=300)
        for i in range(6):
            log.append_as_leader([b"synced-%d" % i], 1, 0)
        log.flush()
        for i in range(4):
            log.append_as_leader([b"held-%d" % i], 2, 0)
        assert log.end_offset() == 10 and log.flushed_offset() == 6
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, timeout=30)
    assert done.returncode == -9
    with DiskLog(tmp_path) as reopened:
        assert reopened.end_offset() == 6
        assert values(reopened) == [b"synced-%d" % i for i in range(6)]
        assert reopened.last_fetched_epoch() == 1


def test_unflushed_appends_are_readable_and_held_out_of_the_file(tmp_path: Path) -> None:
    log = DiskLog(tmp_path, disk_mode=POWER_LOSS_SIM)
    log.append_as_leader([b"a", b"b"], 1, 0)
    log.flush()
    log.append_as_leader([b"c"], 1, 0)
    segment = log._segments[-1]
    assert isinstance(segment, HeldSegment) and segment.held_bytes > 0
    on_disk = log.segment_paths()[-1].stat().st_size
    assert values(log) == [b"a", b"b", b"c"]
    assert [b.base_offset for b in log.read_committed(0, 3)] == [0, 2]
    # Truncating inside the held tail only drops held bytes; the file is unchanged.
    log.truncate_to(2)
    assert segment.held_bytes == 0 and log.segment_paths()[-1].stat().st_size == on_disk
    log.append_as_leader([b"d"], 2, 0)
    log.close()  # a clean close writes what is held, as the OS would after a clean exit
    with DiskLog(tmp_path) as reopened:
        assert values(reopened) == [b"a", b"b", b"d"]


def test_truncate_below_the_file_end_cuts_the_file(tmp_path: Path) -> None:
    log = DiskLog(tmp_path, disk_mode=POWER_LOSS_SIM)
    for value in (b"x", b"y", b"z"):
        log.append_as_leader([value], 1, 0)
    log.flush()
    log.append_as_leader([b"w"], 1, 0)
    log.truncate_to(1)
    assert values(log) == [b"x"] and log.end_offset() == 1
    log.close()
    with DiskLog(tmp_path) as reopened:
        assert values(reopened) == [b"x"]


def test_the_disk_mode_comes_from_the_node_config(tmp_path: Path) -> None:
    config = tmp_path / "node.properties"
    props = {
        "node.id": "1", "process.roles": "controller",
        "listeners": "CONTROLLER://127.0.0.1:1", "metadata.log.dir": str(tmp_path / "m"),
        "minikraft.disk.mode": "power-loss-sim",
    }
    config.write_text(render_properties(props))
    try:
        load_node_config(config)
        assert power_loss.default_disk_mode() == POWER_LOSS_SIM
        assert DiskLog(tmp_path / "log").disk_mode == POWER_LOSS_SIM
        config.write_text(render_properties({**props, "minikraft.disk.mode": "ramdisk"}))
        with pytest.raises(ConfigError, match=r"minikraft\.disk\.mode"):
            load_node_config(config)
    finally:
        power_loss.set_default_disk_mode(None)
    assert check_disk_mode("") == "normal"
    assert DiskLog(tmp_path / "log2").disk_mode == "normal"
