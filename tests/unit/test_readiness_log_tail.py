"""A node that dies during start-up is reported with the end of its log (cluster/launch/
readiness.py): CI keeps only the error text, not the test's log directory."""

from __future__ import annotations

from pathlib import Path

from cluster.launch.readiness import log_tail


def test_the_last_lines_of_the_log_travel_in_the_message(tmp_path: Path) -> None:
    log = tmp_path / "broker-101.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)) + "OSError: [Errno 98] in use\n")
    tail = log_tail(str(log), lines=3)
    assert tail.splitlines() == [
        "",
        f"  last lines of {log}:",
        "    line 98",
        "    line 99",
        "    OSError: [Errno 98] in use",
    ]


def test_a_long_log_is_read_from_its_end_only(tmp_path: Path) -> None:
    log = tmp_path / "controller-1.log"
    log.write_bytes(b"x" * 1_000_000 + b"\nthe end\n")
    assert log_tail(str(log), lines=1, max_bytes=64).endswith("    the end")


def test_a_missing_or_empty_log_says_so(tmp_path: Path) -> None:
    assert "No such file" in log_tail(str(tmp_path / "gone.log"))
    (tmp_path / "empty.log").write_text("")
    assert "is empty" in log_tail(str(tmp_path / "empty.log"))
