"""Wait until a local cluster is ready: the quorum has a leader that every voter follows, and
every broker is registered and unfenced (asked of the brokers themselves through METADATA); and
poll_until, the bounded wait for any condition of a cluster the benchmarks and tests watch."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from cluster.client.admin_client import QuorumStatus, describe_quorum
from cluster.client.bootstrap import new_client
from cluster.client.broker_client import metadata
from cluster.launch.local_cluster import LocalCluster
from kafkawire.errors import KafkaError


def poll_until(check: Callable[[], object], timeout_s: float, what: str,
               poll_s: float = 0.1) -> float:
    """The seconds until `check()` held, asking every poll_s; TimeoutError naming `what` when it
    did not within timeout_s."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if check():
            return time.monotonic() - started
        time.sleep(poll_s)
    raise TimeoutError(f"{what} not within {timeout_s:.0f}s")


async def wait_until_ready(
    cluster: LocalCluster,
    timeout_s: float,
    progress: Callable[[str], None] | None = None,
) -> QuorumStatus:
    deadline = time.monotonic() + timeout_s
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        dead = [
            s.name
            for s in cluster.controllers + cluster.brokers
            if s.pid is not None and not _alive(cluster, s.name)
        ]
        if dead:
            raise TimeoutError(
                f"{', '.join(dead)} exited during start-up"
                + "".join(log_tail(cluster.node(name).log_file) for name in dead)
            )
        try:
            status = await describe_quorum(cluster.bootstrap_controller, timeout_ms=1000)
            if status.leader_id is not None and len(status.voters) == len(cluster.controllers):
                waiting = await brokers_not_ready(cluster)
                if not waiting:
                    return status
                last_error = f"brokers not registered and unfenced: {waiting}"
            else:
                last_error = f"leader {status.leader_id}, {len(status.voters)} voters"
        except KafkaError as exc:
            last_error = str(exc)
        if progress is not None:
            progress(f"waiting for the quorum: {last_error}")
        await asyncio.sleep(0.2)
    raise TimeoutError(f"after {timeout_s:.0f}s: {last_error}")


def log_tail(log_file: str, lines: int = 15, max_bytes: int = 16384) -> str:
    """The last lines of a node's log, indented under a heading, for an error that says a node
    died: the log directory is often gone by the time anyone reads the error (a test's tmp dir,
    a CI machine), so the reason must travel in the message itself."""
    try:
        with open(log_file, "rb") as log:
            log.seek(0, 2)
            log.seek(max(0, log.tell() - max_bytes))
            tail = log.read().decode(errors="replace").splitlines()[-lines:]
    except OSError as exc:
        return f"\n  ({log_file}: {exc.strerror})"
    if not tail:
        return f"\n  ({log_file} is empty)"
    return f"\n  last lines of {log_file}:\n" + "\n".join(f"    {line}" for line in tail)


def _alive(cluster: LocalCluster, name: str) -> bool:
    return any(s.name == name for s in cluster.running())


async def brokers_not_ready(cluster: LocalCluster, timeout_ms: int = 1000) -> list[int]:
    """Broker ids that are not yet registered and unfenced in every broker's metadata."""
    if not cluster.brokers:
        return []
    wanted = {b.node_id for b in cluster.brokers}
    client = new_client("minikraft-readiness", request_timeout_ms=timeout_ms)
    not_ready: set[int] = set()
    try:
        for spec in cluster.brokers:
            try:
                response = await metadata(client, [spec.address], [], timeout_ms)
            except KafkaError:
                not_ready.add(spec.node_id)
                continue
            # Kafka's Metadata lists the live (registered, unfenced) brokers only.
            not_ready |= wanted - {int(b.node_id) for b in response.brokers}
    finally:
        await client.close()
    return sorted(not_ready)


async def wait_node_ready(cluster: LocalCluster, name: str, timeout_s: float) -> None:
    """One (re)started node is back: a broker registered and unfenced in its own metadata, a
    controller answering on its listener while the quorum has a leader."""
    spec = cluster.node(name)
    deadline = time.monotonic() + timeout_s
    last_error = "no answer yet"
    client = new_client("minikraft-readiness", request_timeout_ms=1000)
    try:
        while time.monotonic() < deadline:
            if not _alive(cluster, spec.name):
                raise TimeoutError(
                    f"{spec.name} exited during start-up" + log_tail(spec.log_file)
                )
            try:
                if spec.role == "broker":
                    response = await metadata(client, [spec.address], [], 1000)
                    if spec.node_id in {int(b.node_id) for b in response.brokers}:
                        return
                    last_error = f"{spec.name} is not yet registered and unfenced"
                else:
                    host, port = spec.host, spec.port
                    _reader, writer = await asyncio.wait_for(
                        asyncio.open_connection(host, port), 1.0
                    )
                    writer.close()
                    status = await describe_quorum(cluster.bootstrap_controller, timeout_ms=1000)
                    if status.leader_id is not None:
                        return
                    last_error = "the quorum has no leader"
            except (KafkaError, OSError, TimeoutError) as exc:
                last_error = str(exc) or type(exc).__name__
            await asyncio.sleep(0.1)
    finally:
        await client.close()
    raise TimeoutError(f"{spec.name} not ready after {timeout_s:.0f}s: {last_error}")
