"""Runs a guided scenario's steps: the step's action through ConsoleActions, then its check on
each following tick until it holds (bounded by the step's timeout)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from cluster.console.core.scenarios import SCENARIOS, Scenario, Snapshot, scenario_json
from cluster.console.core.view import Tick
from cluster.console.runtime.actions import ActionError, ConsoleActions
from cluster.console.runtime.poller import ClusterWatcher
from kafkawire.clock import now_ms


class ScenarioRunner:
    def __init__(self, watcher: ClusterWatcher, actions: ConsoleActions) -> None:
        self.watcher = watcher
        self.actions = actions
        self.scenario: Scenario | None = None
        self.ctx: dict[str, Any] = {}
        self.steps: list[dict[str, Any]] = []
        self.log_from = 0
        self.running: asyncio.Task[None] | None = None
        self.version = 0

    def json(self) -> dict[str, Any] | None:
        if self.scenario is None:
            return None
        return {**scenario_json(self.scenario), "status": self.steps,
                "roles": {k: v for k, v in self.ctx.items() if isinstance(v, int | str)},
                "running": self.running is not None and not self.running.done(),
                "version": self.version}

    def _bump(self) -> None:
        self.version += 1
        self.watcher.changed.set()

    def start(self, name: str) -> dict[str, Any]:
        if self.running is not None and not self.running.done():
            raise ActionError("a scenario step is running")
        if name not in SCENARIOS:
            raise ActionError(f"unknown scenario {name!r}; known: {sorted(SCENARIOS)}")
        self.scenario = SCENARIOS[name]
        self.ctx = {"topic": f"guided-{name}-{uuid.uuid4().hex[:4]}"}
        self.steps = [{"state": "pending", "detail": ""} for _ in self.scenario.steps]
        self.log_from = self.watcher.view.next_offset
        self._bump()
        return self.json() or {}

    def snapshot(self) -> Snapshot:
        state = self.watcher.state
        log = [e.to_json() for e in self.watcher.view.entries if e.offset >= self.log_from]
        return Snapshot(state.rows, state.brokers, state.quorum, log)

    async def _next_tick(self, timeout_s: float) -> None:
        seen = asyncio.Event()

        def on_tick(_tick: Tick) -> None:
            seen.set()

        self.watcher.subscribers.add(on_tick)
        try:
            self.watcher.changed.set()
            await asyncio.wait_for(seen.wait(), timeout_s)
        finally:
            self.watcher.subscribers.discard(on_tick)

    async def run_step(self, index: int) -> dict[str, Any]:
        assert self.scenario is not None
        step = self.scenario.steps[index]
        status = self.steps[index]
        status.update(state="running", detail="", started_ms=now_ms())
        self._bump()
        try:
            request = step.act(self.ctx, self.snapshot())
            if request is not None:
                status["action"] = await self.actions.run(request)
            deadline = time.monotonic() + step.timeout_s
            while True:
                # Judge only a state polled after the action returned.
                await self._next_tick(max(1.0, self.watcher.interval_s * 3))
                problem = step.check(self.ctx, self.snapshot())
                if problem is None:
                    status.update(state="ok", detail="holds")
                    break
                status["detail"] = problem
                self._bump()
                if time.monotonic() > deadline:
                    status["state"] = "failed"
                    break
        except Exception as exc:  # a failed step is shown, never ends the console
            status.update(state="failed", detail=str(exc) or type(exc).__name__)
        status["ended_ms"] = now_ms()
        self._bump()
        return status

    async def _run(self, indexes: list[int]) -> None:
        for index in indexes:
            result = await self.run_step(index)
            if result["state"] != "ok":
                return

    def launch(self, index: int | None) -> None:
        """Run one step (index) or every step not done yet (None), in the background."""
        if self.scenario is None:
            raise ActionError("no scenario started")
        if self.running is not None and not self.running.done():
            raise ActionError("a scenario step is running")
        if index is None:
            indexes = [i for i, s in enumerate(self.steps) if s["state"] != "ok"]
        else:
            if not 0 <= index < len(self.steps):
                raise ActionError(f"no step {index}")
            indexes = [index]
        self.running = asyncio.create_task(self._run(indexes))
