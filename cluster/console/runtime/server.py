"""The console's aiohttp server: one page, its static files, a server-sent-events stream, and
POST endpoints for actions and guided scenarios. Binds 127.0.0.1 unless told otherwise.

The browser never polls: it opens /events with its filter (topic regex, partition, only, the
selected partition), gets every row that filter selects once ("full"), then after each poll
only the rows that changed, the new log entries and, when they changed, quorum, brokers,
scenario and workload ("tick"). A filter change opens a new stream. A subscriber that falls
behind (its queue full) gets a fresh "full" instead of a backlog, so a slow tab costs memory
bounded by its queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from pathlib import Path
from typing import Any

from aiohttp import web

from cluster.console.core.scenarios import SCENARIOS, scenario_json
from cluster.console.core.view import RowFilter, Tick
from cluster.console.runtime.actions import ActionError, ConsoleActions
from cluster.console.runtime.poller import ClusterWatcher
from cluster.console.runtime.scenario_runner import ScenarioRunner
from kafkawire.clock import now_ms

log = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent.parent / "static"
QUEUE_TICKS = 64
HEARTBEAT_S = 15.0
DEFAULT_PORT = 8070


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)


class ConsoleServer:
    def __init__(self, directory: Path, interval_s: float = 1.0) -> None:
        self.watcher = ClusterWatcher(directory, interval_s)
        self.actions = ConsoleActions(self.watcher)
        self.scenarios = ScenarioRunner(self.watcher, self.actions)
        self._stop = asyncio.Event()
        self._poller: asyncio.Task[None] | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0
        self._extras_sent: dict[str, Any] = {}

    # -- app ----------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/", self._index)
        app.router.add_static("/static/", STATIC)
        app.router.add_get("/events", self._events)
        app.router.add_get("/api/state", self._state)
        app.router.add_get("/api/scenarios", self._list_scenarios)
        app.router.add_post("/api/action", self._action)
        app.router.add_post("/api/scenario", self._scenario)
        app.router.add_get("/api/timeline", self._timeline)
        audits = self.watcher.directory / "console-audit"
        audits.mkdir(parents=True, exist_ok=True)
        app.router.add_static("/audit/", audits)
        return app

    async def start(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> int:
        self._poller = asyncio.create_task(self.watcher.run(self._stop))
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = site._server
        self.port = port
        if server is not None and port == 0:
            self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        return self.port

    async def stop(self) -> None:
        self._stop.set()
        self.watcher.changed.set()
        await self.actions.stop_workload()
        if self.scenarios.running is not None:
            self.scenarios.running.cancel()
            with contextlib.suppress(BaseException):
                await self.scenarios.running
        if self._poller is not None:
            with contextlib.suppress(Exception):
                await self._poller
        if self._runner is not None:
            await self._runner.cleanup()

    # -- handlers -----------------------------------------------------------------------------

    async def _index(self, _request: web.Request) -> web.FileResponse:
        return web.FileResponse(STATIC / "index.html")

    def extras(self) -> dict[str, Any]:
        """Scenario, workload and the action log: sent when they change."""
        return {
            "scenario": self.scenarios.json(),
            "workload": self.actions.workload_status(),
            "actions": self.actions.history[-30:],
            "audits": self.actions.audits[-5:],
            "busy": sorted(self.actions.busy),
            "poll_ms": round(self.watcher.last_poll_ms, 1),
        }

    def full(self, flt: RowFilter) -> dict[str, Any]:
        message = self.watcher.state.full_for(flt, now_ms(), self.watcher.view.entries)
        message.update(self.extras())
        message["scenarios"] = [scenario_json(s) for s in SCENARIOS.values()]
        return message

    async def _events(self, request: web.Request) -> web.StreamResponse:
        flt = RowFilter.parse(request.query)
        response = web.StreamResponse(headers={
            "Content-Type": "text/event-stream", "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no"})
        await response.prepare(request)
        queue: asyncio.Queue[Tick | None] = asyncio.Queue(QUEUE_TICKS)
        overflow = False

        def on_tick(tick: Tick) -> None:
            nonlocal overflow
            try:
                queue.put_nowait(tick)
            except asyncio.QueueFull:
                overflow = True

        self.watcher.subscribers.add(on_tick)
        last_extras = ""
        try:
            await response.write(f"event: full\ndata: {_dumps(self.full(flt))}\n\n".encode())
            while not self._stop.is_set():
                try:
                    tick = await asyncio.wait_for(queue.get(), HEARTBEAT_S)
                except TimeoutError:
                    await response.write(b": keep-alive\n\n")
                    continue
                if tick is None:
                    break
                if overflow:
                    overflow = False
                    while not queue.empty():
                        queue.get_nowait()
                    await response.write(
                        f"event: full\ndata: {_dumps(self.full(flt))}\n\n".encode())
                    continue
                message = self.watcher.state.tick_for(tick, flt)
                extras = self.extras()
                encoded = _dumps(extras)
                if encoded != last_extras:
                    message.update(extras)
                    last_extras = encoded
                if flt.selected and flt.selected in tick.timeline:
                    message["timeline"] = {flt.selected: tick.timeline[flt.selected]}
                await response.write(f"event: tick\ndata: {_dumps(message)}\n\n".encode())
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.watcher.subscribers.discard(on_tick)
        return response

    async def _state(self, request: web.Request) -> web.Response:
        """The same document as the stream's first message (for scripts and curl)."""
        return web.json_response(self.full(RowFilter.parse(request.query)), dumps=_dumps)

    async def _timeline(self, request: web.Request) -> web.Response:
        key = request.query.get("key", "")
        return web.json_response({"key": key,
                                  "points": self.watcher.state.timelines.series(key)})

    async def _list_scenarios(self, _request: web.Request) -> web.Response:
        return web.json_response([scenario_json(s) for s in SCENARIOS.values()])

    async def _body(self, request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except ValueError as exc:
            raise ActionError(f"the body is not JSON: {exc}") from exc
        if not isinstance(body, dict):
            raise ActionError("the body is a JSON object")
        return body

    async def _action(self, request: web.Request) -> web.Response:
        try:
            body = await self._body(request)
            result = await self.actions.run(body)
        except ActionError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        except Exception as exc:  # shown on the page; the console serves on
            log.exception("console: action failed")
            return web.json_response({"error": f"{type(exc).__name__}: {exc}"}, status=500)
        return web.json_response({"ok": True, "result": result}, dumps=_dumps)

    async def _scenario(self, request: web.Request) -> web.Response:
        """{"start": name} | {"step": index} | {"all": true}"""
        try:
            body = await self._body(request)
            running = self.scenarios.running
            if running is not None and not running.done():
                # A click right after a step showed "ok": its task is about to finish.
                await asyncio.wait({running}, timeout=2.0)
            if "start" in body:
                self.scenarios.start(str(body["start"]))
            elif body.get("all"):
                self.scenarios.launch(None)
            elif isinstance(body.get("step"), int):
                self.scenarios.launch(int(body["step"]))
            else:
                raise ActionError('expected {"start": name}, {"step": n} or {"all": true}')
        except ActionError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response({"ok": True, "scenario": self.scenarios.json()})


async def serve(directory: Path, host: str, port: int, interval_s: float,
                ready: asyncio.Event | None = None) -> None:
    """Run until cancelled (Ctrl-C / SIGTERM)."""
    server = ConsoleServer(directory, interval_s)
    bound = await server.start(host, port)
    print(f"minikraft console: http://{host}:{bound}/  (cluster {directory})", flush=True)
    if ready is not None:
        ready.set()
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()
