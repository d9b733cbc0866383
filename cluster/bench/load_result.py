"""What one produce load measured, for `bench produce`'s own producers and its librdkafka line
alike: records acked with their ack latencies, failures by error name, the wall time."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LoadResult:
    acked: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)
    elapsed_s: float = 0.0
    server_cpu_s: float | None = None  # the servers' CPU during the load (None: no /proc)
    version: str = ""  # the client library's, where it is not ours (librdkafka)

    def ack(self, latency_ms: float, records: int = 1) -> None:
        """`records` acked together (one batch), each with the batch's latency."""
        self.acked += records
        self.latencies_ms.extend([latency_ms] * records)

    def fail(self, error_name: str, records: int = 1) -> None:
        self.errors[error_name] = self.errors.get(error_name, 0) + records

    @property
    def records_per_s(self) -> float:
        return self.acked / max(self.elapsed_s, 1e-9)
