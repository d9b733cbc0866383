"""analytics.spark_session.master_cores: the cores the audit sizes its replay buckets for
before its session is up."""

from __future__ import annotations

import os

from analytics.spark_session import master_cores


def test_local_masters_give_their_thread_count() -> None:
    assert master_cores("local[2]") == 2
    assert master_cores("local[3, 4]") == 3  # local[N, maxFailures]
    assert master_cores("local") == 1
    assert master_cores("local[0]") == 1


def test_other_masters_give_this_machines_cores() -> None:
    cores = os.cpu_count() or 1
    assert master_cores("local[*]") == cores
    assert master_cores("spark://127.0.0.1:7077") == cores
