"""A minimal broker stand-in for controller tests: it registers with the active controller over
Kafka's protocol (BrokerRegistration v4) and heartbeats (BrokerHeartbeat v1), with the broker's
own messages (kafkawire/broker_lifecycle.py); on NOT_CONTROLLER or an
unreachable or silent controller it tries the next bootstrap controller at once, as a broker does. It hosts no partitions and does not replay the
metadata log: it reports its own registration offset as its metadata offset, which is exactly
what the controller needs to unfence it (caught up to its registration).

`follower_fetch` sends one follower Fetch the way a replica fetcher does, for tests that probe a
leader's answers to followers.

`FakeBrokers` runs several on an event loop in a background thread, so synchronous tests can call
the CLI meanwhile; `stop()` ends them (without controlled shutdown, like a crash).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from typing import Any

from kio.static.primitive import i32, i64

from broker.core import messages as bm
from broker.runtime.kafka_replication import (
    PartitionData,
    fetch_answers,
    fetch_error,
    fetch_request_to_kio,
)
from cluster.client.bootstrap import split_bootstrap
from kafkawire import broker_lifecycle as lifecycle
from kafkawire.client import KafkaClient
from kafkawire.errors import Errors, KafkaError
from kafkawire.messages import error_code

HEARTBEAT_INTERVAL_S = 0.2
REQUEST_TIMEOUT_MS = 2000


class FakeBroker:
    def __init__(self, bootstrap_controller: str, cluster_id: str, broker_id: int) -> None:
        self.bootstrap = bootstrap_controller
        self.cluster_id = cluster_id
        self.broker_id = broker_id
        self.incarnation_id = uuid.uuid4()
        self.broker_epoch = -1
        self.previous_broker_epoch = -1
        self.fenced = True
        self.errors: list[str] = []
        self._client = KafkaClient(
            f"fake-broker-{broker_id}", request_timeout_ms=REQUEST_TIMEOUT_MS
        )
        self._controller: str | None = None  # the last controller that answered

    async def run(self, stop: asyncio.Event) -> None:
        try:
            while not stop.is_set():
                try:
                    if self.broker_epoch < 0:
                        await self.register()
                    else:
                        await self.heartbeat()
                except KafkaError as exc:
                    self.errors.append(exc.error.name)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), HEARTBEAT_INTERVAL_S)
        finally:
            await self._client.close()

    async def _send(self, request: object) -> Any:
        """The active controller's answer: the last one that answered first, then the other
        bootstrap controllers; NOT_CONTROLLER or no connection moves on to the next."""
        controllers = split_bootstrap(self.bootstrap)
        if self._controller in controllers:
            controllers.remove(self._controller)
            controllers.insert(0, self._controller)
        failure = KafkaError(Errors.NETWORK_EXCEPTION, "no controller answered")
        for address in controllers:
            try:
                response = await self._client.request(address, request)
            except KafkaError as exc:
                if exc.error not in (Errors.NETWORK_EXCEPTION, Errors.REQUEST_TIMED_OUT):
                    raise
                failure = exc
                continue
            code = Errors.of(response.error_code)
            if code is Errors.NOT_CONTROLLER:
                failure = KafkaError(code, f"{address} is not the active controller")
                continue
            self._controller = address
            if code is not Errors.NONE:
                raise KafkaError(code, "")
            return response
        raise failure

    async def register(self) -> None:
        response = await self._send(
            lifecycle.registration_request(
                self.broker_id,
                self.cluster_id,
                self.incarnation_id,
                [("PLAINTEXT", "127.0.0.1", 29000 + self.broker_id)],
                previous_broker_epoch=self.previous_broker_epoch,
            )
        )
        assert isinstance(response, lifecycle.BrokerRegistrationResponse)
        self.broker_epoch = int(response.broker_epoch)

    async def heartbeat(self) -> None:
        try:
            response = await self._send(
                lifecycle.heartbeat_request(self.broker_id, self.broker_epoch, self.broker_epoch)
            )
        except KafkaError as exc:
            if exc.error in (Errors.STALE_BROKER_EPOCH, Errors.BROKER_ID_NOT_REGISTERED):
                self.broker_epoch = -1  # register again
            raise
        assert isinstance(response, lifecycle.BrokerHeartbeatResponse)
        self.fenced = response.is_fenced


class FakeBrokers:
    """Brokers on a background event loop; use as a context manager or start()/stop()."""

    def __init__(self, bootstrap_controller: str, cluster_id: str, broker_ids: list[int]) -> None:
        self.brokers = {b: FakeBroker(bootstrap_controller, cluster_id, b) for b in broker_ids}
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, name="fake-brokers", daemon=True)
        self._started = threading.Event()

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._run_all())
        self._loop.close()

    async def _run_all(self) -> None:
        self._stop = asyncio.Event()
        self._started.set()
        await asyncio.gather(*(b.run(self._stop) for b in self.brokers.values()))

    def start(self) -> FakeBrokers:
        self._thread.start()
        self._started.wait(5)
        return self

    def stop(self) -> None:
        if self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def wait_unfenced(self, timeout_s: float = 15) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(b.broker_epoch >= 0 and not b.fenced for b in self.brokers.values()):
                return
            time.sleep(0.05)
        state = {
            b.broker_id: (b.broker_epoch, b.fenced, b.errors[-3:]) for b in self.brokers.values()
        }
        raise AssertionError(f"brokers not unfenced within {timeout_s}s: {state}")

    def __enter__(self) -> FakeBrokers:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def follower_fetch(
    address: str,
    request: bm.FetchRequest,
    topic_id: uuid.UUID,
    cluster_id: str | None = None,
) -> PartitionData:
    """One follower Fetch (v17, ReplicaState from `request`) to a broker's Kafka listener, as a
    replica fetcher sends it; the partition's answer (a top-level error as its error)."""
    client = KafkaClient(f"node-{request.replica_id}", request_timeout_ms=5000)
    try:
        body = await client.request(address, fetch_request_to_kio(request, topic_id, cluster_id))
    finally:
        await client.close()
    error = fetch_error(body)
    answer = fetch_answers(body).get((topic_id, request.partition))
    if error is not Errors.NONE or answer is None:
        return PartitionData(
            partition_index=i32(request.partition),
            error_code=error_code(error if error is not Errors.NONE else Errors.UNKNOWN_SERVER_ERROR),
            high_watermark=i64(-1),
            aborted_transactions=None,
            records=None,
        )
    return answer
