"""One plan for both clusters (cluster/apache_kafka/cluster.py): Apache Kafka's nodes get the
ids, addresses and directories LocalCluster.plan gives minikraft's, and their properties are
the shared ones in Kafka's terms (no minikraft-only keys, Kafka's listener map, overrides kept);
a standalone quorum starts with the first controller alone."""

from __future__ import annotations

from pathlib import Path

from cluster.apache_kafka.cluster import ApacheKafkaCluster
from cluster.launch.local_cluster import LocalCluster


def test_kafka_nodes_follow_the_shared_plan(tmp_path: Path) -> None:
    knobs = {"broker.session.timeout.ms": "6000", "minikraft.log.flush.in.thread": "true"}
    kafka = ApacheKafkaCluster.plan(tmp_path / "k", controllers=3, brokers=2, base_port=30000,
                                    overrides=knobs)
    mk = LocalCluster.plan(tmp_path / "m", controllers=3, brokers=2, base_port=30000,
                           overrides=knobs)
    assert [(s.role, s.node_id, s.port) for s in kafka.all_nodes()] == [
        (s.role, s.node_id, s.port) for s in mk.all_nodes()]
    assert [n.node_id for n in kafka.brokers] == [101, 102]
    broker = kafka.node_properties(kafka.brokers[0])
    shared = mk.node_properties(mk.brokers[0])
    assert broker["node.id"] == shared["node.id"] == "101"
    assert broker["listeners"] == shared["listeners"] == "PLAINTEXT://127.0.0.1:30101"
    assert broker["controller.quorum.bootstrap.servers"] == kafka.bootstrap_controller
    assert broker["broker.session.timeout.ms"] == "6000"  # the plan's override, on both
    assert not any(k.startswith(("minikraft.", "http.")) for k in broker)
    assert broker["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    assert broker["offsets.topic.replication.factor"] == "2"  # at most the brokers there are
    controller = kafka.node_properties(kafka.controllers[0])
    assert controller["log.dirs"] == controller["metadata.log.dir"] == str(
        tmp_path / "k" / "controller-1" / "metadata")


def test_format_arguments_name_the_quorum_and_the_elr_feature(tmp_path: Path) -> None:
    kafka = ApacheKafkaCluster.plan(tmp_path, controllers=3, brokers=1, base_port=30000)
    voters = kafka.bootstrap_voters(standalone=False)
    assert [c.node_id for c in voters] == [1, 2, 3]
    assert [c.node_id for c in kafka.bootstrap_voters(standalone=True)] == [1]
    initial = kafka.initial_controllers(voters, {1: "a", 2: "b", 3: "c"})
    assert initial == "1@127.0.0.1:30001:a,2@127.0.0.1:30002:b,3@127.0.0.1:30003:c"
    args = kafka.storage_format_args(kafka.controllers[0], ["--standalone"])
    assert args[:5] == ["format", "--config", kafka.controllers[0].config, "--cluster-id",
                        kafka.cluster_id]
    assert "eligible.leader.replicas.version=1" in args and args[-1] == "--standalone"
    off = ApacheKafkaCluster.plan(tmp_path / "off", controllers=1, brokers=1, base_port=30000,
                                  overrides={"eligible.leader.replicas.enabled": "false"})
    assert "eligible.leader.replicas.version=0" in off.storage_format_args(off.brokers[0], [])
    assert not kafka.cluster_id.startswith("-")  # an option to kafka-storage otherwise
