"""Helpers for membership tests with real processes: a controller formatted with
`--no-initial-controllers` joins an existing LocalCluster as an observer (KIP-853, seed 003)."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from cluster.client.admin_client import QuorumStatus
from cluster.launch.local_cluster import LocalCluster, NodeSpec, free_ports
from kafkawire.config import render_properties
from raft.core.replica_key import ReplicaKey, uuid_to_str
from raft.runtime.meta_properties import read_meta_properties
from tests.integration.conftest import minikraft


def new_controller_spec(cluster: LocalCluster, node_id: int) -> NodeSpec:
    """Plan controller node_id on fresh ephemeral ports and write its properties (as
    LocalCluster.node_properties does); it joins cluster.controllers, so cluster.stop() stops it."""
    port, http_port = free_ports(2)
    spec = cluster._spec("controller", node_id, port, http_port, {}, cluster.host)
    props = cluster.node_properties(spec)
    Path(spec.config).parent.mkdir(parents=True, exist_ok=True)
    Path(spec.config).write_text(render_properties(props))
    cluster.controllers.append(spec)
    return spec


def metadata_dir(spec: NodeSpec) -> Path:
    return Path(spec.dir) / "metadata"


def format_observer(cluster: LocalCluster, spec: NodeSpec) -> uuid.UUID:
    """`minikraft storage format --no-initial-controllers`: a new directory id, no voter set."""
    result = minikraft("storage", "format", "--config", spec.config, "--cluster-id",
                       cluster.cluster_id, "--no-initial-controllers")
    assert result.returncode == 0, result.stderr
    return directory_id(spec)


def directory_id(spec: NodeSpec) -> uuid.UUID:
    meta = read_meta_properties(metadata_dir(spec))
    assert meta is not None, f"{spec.name} is not formatted"
    spec.directory_id = uuid_to_str(meta.directory_id)
    return meta.directory_id


def wipe_metadata(spec: NodeSpec) -> None:
    """A failed disk: the metadata directory (log, quorum-state, meta.properties) is gone."""
    shutil.rmtree(metadata_dir(spec))


def quorum_cli(cluster: LocalCluster, *args: str, timeout: float = 60):  # type: ignore[no-untyped-def]
    bootstrap = ",".join(c.address for c in cluster.controllers[:3])
    return minikraft("metadata-quorum", "--bootstrap-controller", bootstrap, *args,
                     timeout=timeout)


def keys(status: QuorumStatus) -> tuple[set[ReplicaKey], set[ReplicaKey]]:
    """(voter keys, observer keys) of a DescribeQuorum answer."""
    return set(status.voter_keys()), set(status.observer_keys())
