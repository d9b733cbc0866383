"""Headless Chromium driven over the DevTools protocol (a websocket, through aiohttp): navigate,
evaluate JavaScript, take screenshots. Debian's `chromium` (make system-deps); no downloads.

The browser is started with --remote-debugging-port=0 and announces its websocket on stderr;
the page target's websocket is taken from /json/list. Calls are synchronous for the tests: the
protocol runs on its own event loop in a thread. The process is stopped by its pid."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
START_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 30.0


class DevToolsBrowser:
    def __init__(self, width: int = 1500, height: int = 1100) -> None:
        assert CHROMIUM is not None
        self._profile = tempfile.TemporaryDirectory(prefix="minikraft-chromium-")
        self.process = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
             f"--user-data-dir={self._profile.name}", f"--window-size={width},{height}",
             "--hide-scrollbars", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._session: aiohttp.ClientSession | None = None
        try:
            port = self._devtools_port()
            self._call(self._connect(port))
            self.send("Page.enable")
            self.send("Runtime.enable")
        except BaseException:
            self.close()
            raise

    def _devtools_port(self) -> int:
        assert self.process.stderr is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line and self.process.poll() is not None:
                break
            found = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if found:
                return int(found.group(1))
        raise RuntimeError("chromium did not announce its DevTools port")

    def _call(self, coroutine: Any, timeout_s: float = CALL_TIMEOUT_S) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout_s)

    async def _connect(self, port: int) -> None:
        self._session = aiohttp.ClientSession()
        async with self._session.get(f"http://127.0.0.1:{port}/json/list") as response:
            targets = await response.json(content_type=None)
        page = next(t for t in targets if t.get("type") == "page")
        self._ws = await self._session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        self._loop.create_task(self._reader())

    async def _reader(self) -> None:
        assert self._ws is not None
        async for message in self._ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(message.data)
            future = self._pending.pop(data.get("id", -1), None)
            if future is not None and not future.done():
                future.set_result(data)

    async def _send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self._ws is not None
        ident = next(self._ids)
        future: asyncio.Future[Any] = self._loop.create_future()
        self._pending[ident] = future
        await self._ws.send_str(json.dumps({"id": ident, "method": method, "params": params}))
        answer: dict[str, Any] = await future
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        result: dict[str, Any] = self._call(self._send(method, params))
        return result

    def goto(self, url: str, timeout_s: float = 30) -> None:
        """Navigate and wait until the new document has loaded: Page.navigate answers once the
        navigation starts, and a script run before the load still sees the old page (or none)."""
        self.js("window.__minikraftLeaving = true")
        self.send("Page.navigate", url=url)
        self.wait_js("!window.__minikraftLeaving && document.readyState === 'complete'", timeout_s)

    def js(self, expression: str) -> Any:
        """The value of a JavaScript expression (promises awaited)."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def wait_js(self, expression: str, timeout_s: float, poll_s: float = 0.05) -> Any:
        """Until the expression is truthy; its value."""
        deadline = time.monotonic() + timeout_s
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = self.js(expression)
            except RuntimeError as exc:
                last = exc
            if last and not isinstance(last, Exception):
                return last
            time.sleep(poll_s)
        raise AssertionError(f"never true within {timeout_s}s: {expression[:200]} (last {last})")

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        async def shutdown() -> None:
            if self._ws is not None:
                await self._ws.close()
            if self._session is not None:
                await self._session.close()

        try:
            if self._loop.is_running():
                self._call(shutdown(), 5)
        except Exception:  # the browser may already be gone
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._profile.cleanup()
