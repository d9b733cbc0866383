"""The floor of an acks=all produce on this machine, measured beside the figures (issue 17).

One acks=all record of RF 3 / min ISR 2 needs, in series at best: the leader's fsync (overlapped
with the follower's fetch), the follower's fsync, and two loopback round trips (the fetch that
carries the record, the fetch that reports it). So floor = 2 x fsync p50 + 2 x RTT p50. fsync is
timed in the benchmark's own data directory (same filesystem), the RTT over a TCP connection on
127.0.0.1 with TCP_NODELAY, as the nodes talk.
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from cluster.client.producer import percentile

FSYNC_SAMPLES = 200
RTT_SAMPLES = 2000


@dataclass(frozen=True, slots=True)
class Floor:
    fsync_p50_ms: float
    fsync_p99_ms: float
    rtt_p50_ms: float

    @property
    def one_record_ack_ms(self) -> float:
        return 2 * self.fsync_p50_ms + 2 * self.rtt_p50_ms

    def as_json(self) -> dict[str, float]:
        return {
            "fsync_p50_ms": round(self.fsync_p50_ms, 3),
            "fsync_p99_ms": round(self.fsync_p99_ms, 3),
            "loopback_rtt_p50_ms": round(self.rtt_p50_ms, 4),
            "one_record_ack_floor_ms": round(self.one_record_ack_ms, 3),
        }


def fsync_latencies_ms(directory: Path, samples: int = FSYNC_SAMPLES) -> list[float]:
    """Append 1 KiB and fsync, `samples` times, in a scratch file under `directory`."""
    fd, name = tempfile.mkstemp(prefix="floor-", dir=directory)
    out: list[float] = []
    try:
        block = b"\0" * 1024
        for _ in range(samples):
            os.write(fd, block)
            started = time.perf_counter()
            os.fsync(fd)
            out.append((time.perf_counter() - started) * 1000)
    finally:
        os.close(fd)
        os.unlink(name)
    return out


def loopback_rtts_ms(samples: int = RTT_SAMPLES) -> list[float]:
    """Ping-pong 64 bytes over one TCP connection on 127.0.0.1, `samples` times."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def echo() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while data := conn.recv(64):
                conn.sendall(data)

    server = threading.Thread(target=echo, daemon=True)
    server.start()
    out: list[float] = []
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            payload = b"x" * 64
            for _ in range(samples):
                started = time.perf_counter()
                conn.sendall(payload)
                received = 0
                while received < len(payload):
                    received += len(conn.recv(64))
                out.append((time.perf_counter() - started) * 1000)
    finally:
        listener.close()
        server.join(timeout=5)
    return out


def measure_floor(directory: Path) -> Floor:
    fsyncs = fsync_latencies_ms(directory)
    rtts = loopback_rtts_ms()
    fsyncs.sort()
    rtts.sort()
    return Floor(percentile(fsyncs, 0.5), percentile(fsyncs, 0.99), percentile(rtts, 0.5))
