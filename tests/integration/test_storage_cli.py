"""`minikraft storage random-uuid | format | info` through the real console entry point
(CLI.md "Storage", KIP-856: one fresh directory id per formatted directory)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from raft.core.replica_key import uuid_from_str
from tests.integration.conftest import minikraft


def _config(tmp_path: Path, node_id: int, roles: str = "controller") -> Path:
    path = tmp_path / f"node-{node_id}.properties"
    lines = [
        f"node.id={node_id}",
        f"process.roles={roles}",
        f"metadata.log.dir={tmp_path / f'meta-{node_id}'}",
    ]
    if "controller" in roles:
        lines.append(f"listeners=CONTROLLER://127.0.0.1:{19990 + node_id}")
    if "broker" in roles:
        lines.append(f"log.dirs={tmp_path / f'data-{node_id}-a'},{tmp_path / f'data-{node_id}-b'}")
        lines.append("listeners=PLAINTEXT://127.0.0.1:0")
    path.write_text("\n".join(lines) + "\n")
    return path


def _format(config: Path, cluster_id: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`minikraft storage format --config C --cluster-id ID` with `args` added."""
    return minikraft("storage", "format", "--config", str(config), "--cluster-id", cluster_id,
                     *args)


def test_random_uuid_is_kafka_base64url() -> None:
    first = minikraft("storage", "random-uuid").stdout.strip()
    second = minikraft("storage", "random-uuid").stdout.strip()
    assert len(first) == 22 and first != second
    assert uuid_from_str(first).int != 0


def test_initial_controllers_sets_this_nodes_directory_id_and_info_reports_it(
    tmp_path: Path,
) -> None:
    cluster_id = minikraft("storage", "random-uuid").stdout.strip()
    dir_ids = [minikraft("storage", "random-uuid").stdout.strip() for _ in range(3)]
    initial = ",".join(f"{i + 1}@127.0.0.1:{19991 + i}:{d}" for i, d in enumerate(dir_ids))
    config = _config(tmp_path, 2)
    formatted = _format(config, cluster_id, "--initial-controllers", initial, "--output", "json")
    assert formatted.returncode == 0, formatted.stderr
    info = minikraft("storage", "info", "--config", str(config), "--output", "json")
    data = json.loads(info.stdout)
    assert data["cluster_id"] == cluster_id and data["node_id"] == 2
    metadata = [d for d in data["directories"] if d["metadata"]]
    assert [d["directory_id"] for d in metadata] == [dir_ids[1]]
    assert all(d["formatted"] for d in data["directories"])


def test_broker_directories_each_get_a_fresh_directory_id(tmp_path: Path) -> None:
    cluster_id = minikraft("storage", "random-uuid").stdout.strip()
    config = _config(tmp_path, 7, roles="broker")
    formatted = _format(config, cluster_id)
    assert formatted.returncode == 0, formatted.stderr
    data = json.loads(
        minikraft("storage", "info", "--config", str(config), "--output", "json").stdout
    )
    ids = [d["directory_id"] for d in data["directories"]]
    assert len(ids) == 3 and len(set(ids)) == 3


def test_controller_needs_a_bootstrap_choice_and_rejects_two(tmp_path: Path) -> None:
    cluster_id = minikraft("storage", "random-uuid").stdout.strip()
    config = _config(tmp_path, 1)
    none = _format(config, cluster_id)
    assert none.returncode == 2 and "--standalone" in none.stderr
    both = _format(config, cluster_id, "--standalone", "--no-initial-controllers")
    assert both.returncode == 2
    missing = _format(config, cluster_id, "--initial-controllers", "2@127.0.0.1:1:" + cluster_id)
    assert missing.returncode == 2 and "not in --initial-controllers" in missing.stderr
    malformed = _format(config, cluster_id, "--initial-controllers", "1:127.0.0.1:1")
    assert malformed.returncode == 2 and "expected id@host:port:directory-id" in malformed.stderr
    assert not (tmp_path / "meta-1" / "meta.properties").exists()
