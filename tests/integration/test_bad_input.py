"""Bad input at a real controller process: each gets a Kafka error or a clean close, nothing is
lost, and the node keeps serving (issue "Foundation", "Bad input")."""

from __future__ import annotations

import asyncio
import signal
import socket
import struct
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from cluster.launch.committed_prefix import committed_entries
from cluster.launch.local_cluster import LocalCluster
from kafkawire import broker_lifecycle as lifecycle
from kafkawire.api_keys import ApiKey
from kafkawire.client import KafkaClient, client_id_for_node
from kafkawire.config import NodeConfig
from kafkawire.errors import Errors
from kafkawire.messages import decode_response, encode_request
from raft.core.messages import error_of, vote_request
from raft.runtime.raft_manager import METADATA_PARTITION_DIR
from tests.integration.conftest import minikraft, quorum, wait_for


def _connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=5)
    sock.settimeout(5)
    return sock


def _read_frame(sock: socket.socket) -> bytes:
    header = b""
    while len(header) < 4:
        chunk = sock.recv(4 - len(header))
        if not chunk:
            raise ConnectionError("closed")
        header += chunk
    (length,) = struct.unpack(">I", header)
    payload = b""
    while len(payload) < length:
        chunk = sock.recv(length - len(payload))
        if not chunk:
            raise ConnectionError("closed")
        payload += chunk
    return payload


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, TimeoutError):
        return True


def _api_versions(correlation_id: int) -> bytes:
    return encode_request(
        ApiVersionsRequest(client_software_name="t", client_software_version="1"),
        correlation_id,
        "t",
    )


def _still_serving(cluster: LocalCluster, address: str) -> None:
    """The same process answers a new connection (ApiVersions), and the quorum has a leader."""
    sock = _connect(address)
    sock.sendall(_api_versions(77))
    correlation_id, body = decode_response(_read_frame(sock), int(ApiKey.API_VERSIONS), 3)
    assert correlation_id == 77 and body.error_code == Errors.NONE
    sock.close()
    status = quorum(cluster)
    assert status.leader_id is not None


def test_oversize_frame_closes_the_connection(cluster3: LocalCluster) -> None:
    address = cluster3.controllers[0].address
    sock = _connect(address)
    # Over socket.request.max.bytes: refused before a byte of the body is buffered.
    sock.sendall(struct.pack(">I", 200 * 1024 * 1024) + b"\x00" * 16)
    assert _closed(sock)
    _still_serving(cluster3, address)


def test_garbage_closes_only_that_connection(cluster3: LocalCluster) -> None:
    address = cluster3.controllers[0].address
    healthy = _connect(address)
    bad = _connect(address)
    garbage = b"\xc1\xc1\xc1\xff\x00garbage"
    bad.sendall(struct.pack(">I", len(garbage)) + garbage)
    assert _closed(bad)
    # Another connection to the same process still gets answers.
    healthy.sendall(_api_versions(7))
    correlation_id, _body = decode_response(_read_frame(healthy), int(ApiKey.API_VERSIONS), 3)
    assert correlation_id == 7
    _still_serving(cluster3, address)


def test_unknown_api_key_closes_that_connection(cluster3: LocalCluster) -> None:
    address = cluster3.controllers[1].address
    sock = _connect(address)
    # A request header for api key 4242 (Kafka closes the connection: no schema to answer in).
    payload = struct.pack(">hhih", 4242, 0, 11, 1) + b"t"
    sock.sendall(struct.pack(">I", len(payload)) + payload)
    assert _closed(sock)
    _still_serving(cluster3, address)


def test_a_huge_length_closes_the_connection_not_the_process(cluster3: LocalCluster) -> None:
    """Five body bytes claiming a 2**34-byte field: checked against the bytes left before
    anything is allocated (kio's own reader tried to allocate 32 GiB and aborted the process)."""
    address = cluster3.controllers[2].address
    sock = _connect(address)
    header = encode_request(_vote(1, "x"), 13, "t")[4:]
    # Vote v2's request header (v2: api key, version, correlation id, client id, no tags).
    head_size = 2 + 2 + 4 + 2 + 1 + 1
    payload = header[:head_size] + bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F])
    sock.sendall(struct.pack(">I", len(payload)) + payload)
    assert _closed(sock)
    _still_serving(cluster3, address)


def test_truncated_body_closes_that_connection_and_changes_nothing(cluster3: LocalCluster) -> None:
    before = quorum(cluster3)
    address = cluster3.controllers[1].address
    sock = _connect(address)
    frame = encode_request(_vote(before.leader_epoch + 50, "ignored"), 12, "node-9")
    # Cut the body short but keep the frame's length consistent with what is sent.
    payload = frame[4:-7]
    sock.sendall(struct.pack(">I", len(payload)) + payload)
    assert _closed(sock)
    _still_serving(cluster3, address)
    after = quorum(cluster3)
    assert (after.leader_id, after.leader_epoch) == (before.leader_id, before.leader_epoch)


def _vote(epoch: int, cluster_id: str) -> Any:
    return vote_request(
        replica_epoch=epoch,
        replica_id=9,
        replica_directory_id=uuid.uuid4(),
        voter_id=1,
        voter_directory_id=uuid.UUID(int=0),
        last_offset_epoch=epoch,
        last_offset=10**9,
        cluster_id=cluster_id or None,
    )


def test_foreign_cluster_id_is_refused_and_changes_nothing(cluster3: LocalCluster) -> None:
    before = quorum(cluster3)

    async def vote() -> int:
        # A foreign cluster's candidate on Kafka's protocol (Vote v2 with its ClusterId).
        client = KafkaClient("node-9")
        request = vote_request(
            replica_epoch=before.leader_epoch + 100,
            replica_id=9,
            replica_directory_id=uuid.uuid4(),
            voter_id=1,
            voter_directory_id=uuid.UUID(int=0),
            last_offset_epoch=before.leader_epoch + 100,
            last_offset=10**9,
            cluster_id="AAAAAAAAAAAAAAAAAAAAAA",
        )
        try:
            answer = await client.request(
                cluster3.controllers[0].address, request, timeout_ms=3000
            )
            return error_of(answer)
        finally:
            await client.close()

    assert asyncio.run(vote()) == Errors.INCONSISTENT_CLUSTER_ID
    after = quorum(cluster3)
    # The foreign candidate's huge epoch did not move this quorum.
    assert after.leader_epoch == before.leader_epoch
    assert after.leader_id == before.leader_id


def test_foreign_cluster_id_registration_is_refused_and_registers_nothing(
    cluster3: LocalCluster,
) -> None:
    """BrokerRegistration on Kafka's protocol naming another cluster: the active controller
    answers INCONSISTENT_CLUSTER_ID in the response (standbys NOT_CONTROLLER), the connection
    stays open and no broker is registered."""
    foreign = lifecycle.registration_request(
        7, "AAAAAAAAAAAAAAAAAAAAAA", uuid.uuid4(), [("PLAINTEXT", "127.0.0.1", 1)]
    )

    async def register() -> dict[int, Errors]:
        client = KafkaClient(client_id_for_node(7))
        try:
            answers = {}
            for spec in cluster3.controllers:
                body = await client.request(spec.address, foreign, timeout_ms=5000)
                answers[spec.node_id] = Errors.of(body.error_code)
            return answers
        finally:
            await client.close()

    answers = asyncio.run(register())
    leader = quorum(cluster3).leader_id
    assert answers.pop(leader) is Errors.INCONSISTENT_CLUSTER_ID, answers
    assert set(answers.values()) == {Errors.NOT_CONTROLLER}
    active = cluster3.node(f"controller-{leader}")
    with urllib.request.urlopen(
        f"http://{active.host}:{active.http_port}/metrics", timeout=5
    ) as page:
        metrics = page.read().decode()
    assert "kafka_controller_fenced_broker_count 0.0" in metrics
    assert "kafka_controller_active_broker_count 0.0" in metrics
    _still_serving(cluster3, active.address)


def _crc_covered_byte_near_middle(data: bytearray) -> int:
    """A byte of the batch that spans the middle of the segment, inside the part its CRC32C
    covers (attributes to the end, byte 21 on of record batch v2): a flip in base offset, length,
    leader epoch, magic or the CRC field itself is caught by other checks, with other words in
    the log, so the test picks a byte only the CRC can catch."""
    middle = len(data) // 2
    position = 0
    while position + 12 <= len(data):
        length = int.from_bytes(data[position + 8 : position + 12], "big")
        end = position + 12 + length
        if length == 0 or end > len(data):
            break
        if end > middle:
            covered_start = position + 21
            return min(max(middle, covered_start), end - 1)
        position = end
    raise AssertionError("no batch spans the middle of the segment")


def test_corrupt_segment_byte_truncates_at_the_batch_and_rejoins(cluster3: LocalCluster) -> None:
    status = wait_for(lambda s: s.high_watermark > 10, cluster3, 10)
    follower = next(c for c in cluster3.controllers if c.node_id != status.leader_id)
    cluster3.kill(follower, signal.SIGKILL)
    directory = Path(follower.dir) / "metadata" / METADATA_PARTITION_DIR
    segment = sorted(directory.glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    entries_before = committed_entries(directory, 10**9)
    assert len(data) > 400
    data[_crc_covered_byte_near_middle(data)] ^= 0xFF
    segment.write_bytes(bytes(data))
    restarted_ms = int(time.time() * 1000)
    cluster3.start_node(follower)
    cluster3.write_cluster_file()
    # It comes back, truncates at the bad batch with a log line naming the reason...
    deadline = time.monotonic() + 15
    log_text = ""
    while time.monotonic() < deadline and "CRC32C mismatch" not in log_text:
        time.sleep(0.1)
        log_text = Path(follower.log_file).read_text()
    assert "truncating" in log_text and "CRC32C mismatch" in log_text
    # ...and catches up from the leader past where it was before the damage.
    caught_up = wait_for(
        lambda s: any(
            r["node_id"] == follower.node_id
            and r["last_fetch_timestamp_ms"] > restarted_ms
            and r["log_end_offset"] >= len(entries_before)
            for r in s.replication_json()
        ),
        cluster3,
        15,
    )
    assert caught_up.leader_id is not None
    after = committed_entries(directory, 10**9)
    assert all(after[o] == entries_before[o] for o in entries_before if o in after)


def test_format_refuses_formatted_directory_and_start_needs_format(tmp_path: Path) -> None:
    config_path = tmp_path / "c.properties"
    config_path.write_text(
        "node.id=1\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:0\n"
        f"metadata.log.dir={tmp_path / 'meta'}\n"
    )
    NodeConfig.from_file(config_path)
    started = minikraft("controller", "--config", str(config_path), timeout=30)
    assert started.returncode == 1
    assert "storage format" in started.stderr
    cluster_id = minikraft("storage", "random-uuid").stdout.strip()
    format_args = (
        "storage", "format", "--config", str(config_path), "--cluster-id", cluster_id,
        "--standalone",
    )
    first = minikraft(*format_args)
    assert first.returncode == 0, first.stderr
    second = minikraft(*format_args)
    assert second.returncode == 1
    assert "already formatted" in second.stderr.lower() or "formatted" in second.stderr
    skipped = minikraft(*format_args, "--ignore-formatted")
    assert skipped.returncode == 0


@pytest.mark.parametrize("bad", ["not-a-uuid"])
def test_format_rejects_bad_cluster_id(tmp_path: Path, bad: str) -> None:
    config_path = tmp_path / "c.properties"
    config_path.write_text(
        "node.id=1\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:0\n"
        f"metadata.log.dir={tmp_path / 'meta'}\n"
    )
    result = minikraft(
        "storage", "format", "--config", str(config_path), "--cluster-id", bad, "--standalone"
    )
    assert result.returncode == 2
    assert "cluster-id" in result.stderr


@pytest.mark.parametrize(
    ("role", "setting"),
    [("controller", "eligible.leader.replicas.enabled"), ("broker", "auto.create.topics.enable")],
)
def test_a_garbled_true_false_setting_stops_the_node_at_start_naming_it(
    tmp_path: Path, role: str, setting: str
) -> None:
    config_path = tmp_path / f"{role}.properties"
    lines = [f"node.id={1 if role == 'controller' else 101}", f"process.roles={role}",
             f"metadata.log.dir={tmp_path / 'meta'}", f"{setting}=yes"]
    if role == "controller":
        lines.append("listeners=CONTROLLER://127.0.0.1:0")
    else:
        lines += ["listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={tmp_path / 'data'}",
                  "controller.listener.names=CONTROLLER",
                  "controller.quorum.bootstrap.servers=127.0.0.1:9"]
    config_path.write_text("\n".join(lines) + "\n")
    cluster_id = minikraft("storage", "random-uuid").stdout.strip()
    formatted = minikraft("storage", "format", "--config", str(config_path), "--cluster-id",
                          cluster_id, *(["--standalone"] if role == "controller" else []))
    assert formatted.returncode == 0, formatted.stderr
    started = minikraft(role, "--config", str(config_path), timeout=30)
    assert started.returncode == 2, started.stderr
    assert f"{setting} must be true or false, got 'yes'" in started.stderr
    assert "Traceback" not in started.stderr
