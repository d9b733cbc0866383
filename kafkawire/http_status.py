"""Each node's HTTP side (aiohttp): /metrics (Prometheus text), /health, /v1/status, /v1/faults.

The RPC port carries the protocol; this port is for people and scrapers, so a slow scrape never
sits in front of a Raft round trip.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from aiohttp import web
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from kafkawire.faults import FaultInjector
from kafkawire.gc_tuning import PAUSES, freezes
from kafkawire.loop_lag import LoopLagMonitor

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class StatusNode(Protocol):
    """What a node (broker or controller) shows on its HTTP side."""

    @property
    def registry(self) -> CollectorRegistry: ...

    @property
    def faults(self) -> FaultInjector | None: ...

    def status(self) -> dict[str, Any]: ...

    def health(self) -> tuple[bool, dict[str, Any]]: ...


class HttpStatusServer:
    def __init__(
        self,
        host: str,
        port: int,
        node: StatusNode,
        extra_routes: list[tuple[str, str, Handler]] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self._node = node
        self._runner: web.AppRunner | None = None
        self._extra_routes = extra_routes or []
        # Every node serves its event-loop lag (issue 35): this server is the one piece each
        # node process has, so the monitor lives with it.
        self.loop_lag = LoopLagMonitor()
        self._scrape_lock = asyncio.Lock()
        Gauge(
            "event_loop_lag_max_ms", "event-loop lag, max over the last minute (ms)",
            registry=node.registry,
        ).set_function(lambda: self.loop_lag.lag().max_ms)
        Gauge(
            "event_loop_lag_p99_ms", "event-loop lag, p99 over the last minute (ms)",
            registry=node.registry,
        ).set_function(lambda: self.loop_lag.lag().p99_ms)
        # ... and the garbage collector's pauses, a part of that lag (kafkawire.gc_tuning).
        PAUSES.install()
        Gauge(
            "gc_pause_max_ms", "longest garbage collection over the last minute (ms)",
            registry=node.registry,
        ).set_function(PAUSES.max_ms)
        Gauge(
            "gc_gen2_pause_max_ms", "longest full garbage collection over the last minute (ms)",
            registry=node.registry,
        ).set_function(lambda: PAUSES.max_ms(2))
        Gauge(
            "gc_freezes_total", "times the heap was moved out of the collector (gc.freeze)",
            registry=node.registry,
        ).set_function(freezes)

    async def start(self) -> int:
        self.loop_lag.start()
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/health", self._health_handler)
        app.router.add_get("/v1/status", self._status_handler)
        app.router.add_get("/v1/faults", self._faults_get)
        app.router.add_post("/v1/faults", self._faults_post)
        for method, path, handler in self._extra_routes:
            app.router.add_route(method, path, handler)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = site._server
        if server is not None and self.port == 0:
            self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        return self.port

    async def stop(self) -> None:
        await self.loop_lag.stop()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _metrics(self, _request: web.Request) -> web.Response:
        # Rendered on a worker thread, one scrape at a time (collectors keep caches): the
        # active controller's KIP-966 electable leaders are one labelled line per partition,
        # 1.5 s of pure Python at 100,000 partitions that held the loop (Raft's fetches, the
        # brokers' heartbeats) for the whole scrape; on a thread the loop gets the GIL back
        # every switch interval (issue 35). The collectors read immutable images and single
        # values, and the deques the loop appends to are copied with stable_copy.
        async with self._scrape_lock:
            body = await asyncio.to_thread(generate_latest, self._node.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _health_handler(self, _request: web.Request) -> web.Response:
        healthy, body = self._node.health()
        return web.json_response(body, status=200 if healthy else 503)

    async def _status_handler(self, _request: web.Request) -> web.Response:
        lag = self.loop_lag.lag()
        status = {
            **self._node.status(),
            "event_loop_lag": {"max_ms": round(lag.max_ms, 1), "p99_ms": round(lag.p99_ms, 1)},
            "gc_pause": {
                "max_ms": round(PAUSES.max_ms(), 1),
                "gen2_max_ms": round(PAUSES.max_ms(2), 1),
                "freezes": freezes(),
            },
        }
        return web.json_response(status, dumps=lambda o: json.dumps(o, default=str))

    async def _faults_get(self, _request: web.Request) -> web.Response:
        faults = self._node.faults
        if faults is None:
            return web.json_response({"error": "no fault layer"}, status=404)
        return web.json_response(faults.rules())

    async def _faults_post(self, request: web.Request) -> web.Response:
        faults = self._node.faults
        if faults is None:
            return web.json_response({"error": "no fault layer"}, status=404)
        try:
            faults.apply_json(await request.json())
        except (ValueError, TypeError, KeyError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response(faults.rules())


def node_status_server(
    listener: tuple[str, int] | None,
    node: StatusNode,
    extra_routes: list[tuple[str, str, Handler]] | None = None,
) -> HttpStatusServer | None:
    """The node's HTTP side on `http.listener`, or None where the config names none."""
    return HttpStatusServer(listener[0], listener[1], node, extra_routes) if listener else None
