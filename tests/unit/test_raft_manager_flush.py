"""A broker's metadata observer appends without an fsync, as Kafka's (KafkaRaftManager passes
followersAlwaysFlush = process.roles contains controller), and a clean stop flushes its log."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kafkawire.config import NodeConfig
from raft.runtime.meta_properties import format_directories
from raft.runtime.raft_manager import RaftManager

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


def manager(tmp_path: Path, roles: str) -> RaftManager:
    logs, meta = tmp_path / roles / "logs", tmp_path / roles / "meta"
    format_directories(7, CLUSTER_ID, [logs], meta, metadata_directory_id=None,
                       ignore_formatted=False, bootstrap_voters_raw_batches=None)
    return RaftManager(NodeConfig.from_props({
        "node.id": "7", "process.roles": roles, "log.dirs": str(logs),
        "metadata.log.dir": str(meta), "controller.quorum.bootstrap.servers": "127.0.0.1:1",
        "listeners": "BROKER://127.0.0.1:0" if roles == "broker" else "CONTROLLER://127.0.0.1:0"}))


def test_only_a_controller_flushes_what_it_fetched_before_fetching_again(tmp_path: Path) -> None:
    broker, controller = manager(tmp_path, "broker"), manager(tmp_path, "controller")
    try:
        assert not broker.replica._config.followers_always_flush
        assert controller.replica._config.followers_always_flush
    finally:
        asyncio.run(broker.stop())
        asyncio.run(controller.stop())


def test_a_clean_stop_makes_the_fetched_log_durable(tmp_path: Path) -> None:
    broker = manager(tmp_path, "broker")
    broker.log.append_as_leader([b"a", b"b"], 1, 0)  # appended, not fsync'd
    assert broker.log.flushed_offset() < broker.log.end_offset()
    asyncio.run(broker.stop())
    assert broker.log.flushed_offset() == broker.log.end_offset() == 2
