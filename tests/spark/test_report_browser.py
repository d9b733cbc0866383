"""The audit report in a real browser: headless Chromium renders index.html (file://), the DOM
it built holds the verdict and a fault mark per chart, and the screenshot shows the marks in
their colours (kill, pause, partition, election). Skipped without Chromium (make browser-deps).
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from pyspark.sql import SparkSession

from analytics.audit import run_audit
from analytics.generate import generate_cluster_dir
from analytics.read.datasource import BATCH_COLUMNS, discover_files, iter_file_batches
from analytics.report.render import ELECTION_COLOR, FAULT_COLORS

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(CHROMIUM is None,
                       reason="headless Chromium is not installed (make browser-deps)"),
]
WINDOW = (1100, 2600)
BROWSER_TIMEOUT_S = 120


def _chromium(*args: str) -> subprocess.CompletedProcess[bytes]:
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory(prefix="minikraft-chromium-") as profile:
        return subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", "--hide-scrollbars", *args],
            capture_output=True, timeout=BROWSER_TIMEOUT_S, check=False)


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def _png_pixels(path: Path) -> np.ndarray:
    """An 8-bit RGB(A), non-interlaced PNG as an (h, w, 3) array (what Chromium writes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, idat = 8, b""
    width = height = depth = color_type = 0
    while position < len(data):
        (length,) = struct.unpack_from(">I", data, position)
        kind, body = data[position + 4:position + 8], data[position + 8:position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            width, height, depth, color_type = struct.unpack_from(">IIBB", body)
            assert body[12] == 0, "interlaced PNG"
        elif kind == b"IDAT":
            idat += body
    assert depth == 8 and color_type in (2, 6), (depth, color_type)
    bpp = 3 if color_type == 2 else 4
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8)
    stride = width * bpp
    out = np.zeros((height, stride), dtype=np.uint8)
    previous = np.zeros(stride, dtype=np.int32)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], raw[start + 1:start + 1 + stride].astype(np.int32)
        if kind == 1:  # Sub: a running sum per channel
            line = np.cumsum(line.reshape(width, bpp), axis=0).reshape(-1) % 256
        elif kind == 2:  # Up
            line = (line + previous) % 256
        elif kind in (3, 4):  # Average, Paeth: sequential along the row
            values = line.tolist()
            up = previous.tolist()
            for i in range(stride):
                left = values[i - bpp] if i >= bpp else 0
                if kind == 3:
                    values[i] = (values[i] + (left + up[i]) // 2) % 256
                else:
                    upper_left = up[i - bpp] if i >= bpp else 0
                    values[i] = (values[i] + _paeth(left, up[i], upper_left)) % 256
            line = np.array(values, dtype=np.int32)
        out[y] = line
        previous = line
    return out.reshape(height, width, bpp)[:, :, :3]


def _has_colour(pixels: np.ndarray, hex_colour: str, tolerance: int = 10) -> int:
    rgb = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.int32)
    return int((np.abs(pixels.astype(np.int32) - rgb).max(axis=2) <= tolerance).sum())


def test_report_shows_verdict_faults_and_elections(spark: SparkSession, tmp_path: Path) -> None:
    root = tmp_path / "cluster"
    generate_cluster_dir(root, 900, seed=4, topics=2, partitions_per_topic=2,
                         segment_records=400)
    ts_index = [name for name, _t in BATCH_COLUMNS].index("timestamp_ms")
    times = [row[ts_index] for spec in discover_files(root) if spec.kind == "segment"
             for row in iter_file_batches(spec) if row[ts_index] is not None]
    t0, t1 = min(times), max(times)
    faults = [{"ts_ms": t0 + (t1 - t0) * share // 10, "action": action, "node": node}
              for share, action, node in ((3, "kill", "broker-5"), (5, "pause", "broker-6"),
                                          (7, "partition", "controller-2"))]
    (root / "chaos").mkdir()
    (root / "chaos" / "run-s1-abc.json").write_text(json.dumps({"faults": faults}))

    result = run_audit(root, spark=spark, report_dir=tmp_path / "report")
    assert result.verdict == "clean" and len(result.faults) == 3 and result.elections
    assert all(p["topic"].startswith("topic-") for p in result.partitions)  # names, not ids
    page = tmp_path / "report" / "index.html"

    dom = _chromium("--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = dom.stdout.decode("utf-8")
    assert '<span id="verdict" class="ok">clean</span>' in text
    charts = text.count("<svg")
    assert charts >= 2 * len(result.timelines) > 0
    for kind in ("kill", "pause", "partition"):  # every chart carries every fault
        assert text.count(f'class="fault fault-{kind}"') == charts, kind
    assert "topic-0-0" in text and 'id="index"' in text

    shot = tmp_path / "report.png"
    run = _chromium(f"--screenshot={shot}", f"--window-size={WINDOW[0]},{WINDOW[1]}",
                    page.as_uri())
    assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    pixels = _png_pixels(shot)
    assert pixels.shape[:2] == (WINDOW[1], WINDOW[0])
    for colour in (FAULT_COLORS["kill"], FAULT_COLORS["pause"], FAULT_COLORS["partition"],
                   ELECTION_COLOR):
        assert _has_colour(pixels, colour) > 50, colour
    assert _has_colour(pixels, "#1a7f37") > 20  # the verdict "clean", green
