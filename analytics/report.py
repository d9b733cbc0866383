"""The audit's report: OUT/audit.json (the verdict, per rule the checked count and violations with
evidence, the inputs) and OUT/index.html, self-contained (inline CSS and SVG, no network): a
summary table per rule, the violations, and per-partition timelines of leader, leader epoch and
ISR/ELR size against min ISR, with RECOVERING spans and violations marked."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from analytics.audit import AuditResult

AUDIT_JSON = "audit.json"
INDEX_HTML = "index.html"
_WIDTH, _HEIGHT, _PAD = 900, 120, 34
_MAX_VIOLATIONS_SHOWN = 50
_MAX_SVG_POINTS = 600

_CSS = """
body{font:14px system-ui,sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;margin:8px 0 20px}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}
th{background:#f3f3f3}.ok{color:#1a7f37;font-weight:600}.bad{color:#cf222e;font-weight:600}
.small{font-size:12px;color:#555}svg{background:#fafafa;border:1px solid #ddd;margin:2px 0}
code{font-size:12px}
"""


def write_report(result: AuditResult, out_dir: str | Path) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / AUDIT_JSON).write_text(json.dumps(result.to_json(), indent=2, default=str) + "\n",
                                  encoding="utf-8")
    (out / INDEX_HTML).write_text(render_html(result), encoding="utf-8")
    return out


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _summary(result: AuditResult) -> str:
    rows = []
    for rule in result.rules:
        status = ("<span class=ok>clean</span>" if not rule.violation_count
                  else f"<span class=bad>{rule.violation_count} violation(s)</span>")
        rows.append(f"<tr><td>{rule.rule}</td><td>{_esc(rule.name)}</td>"
                    f"<td>{rule.checked}</td><td>{status}</td></tr>")
    return ("<table><tr><th>rule</th><th>what</th><th>checked</th><th>result</th></tr>"
            + "".join(rows) + "</table>")


def _violations(result: AuditResult) -> str:
    parts = []
    for rule in result.rules:
        if not rule.violations:
            continue
        rows = [f"<tr><td>{_esc(v.get('message'))}</td><td>{_esc(v.get('partition'))}</td>"
                f"<td>{_esc(v.get('node'))}</td><td>{_esc(v.get('offset'))}</td>"
                f"<td><code>{_esc(v.get('file'))}</code></td></tr>"
                for v in rule.violations[:_MAX_VIOLATIONS_SHOWN]]
        parts.append(f"<h3>Rule {rule.rule}: {_esc(rule.name)}</h3><table><tr><th>violation</th>"
                     "<th>partition</th><th>node</th><th>offset</th><th>file</th></tr>"
                     + "".join(rows) + "</table>")
    return "".join(parts) or "<p class=ok>No violations.</p>"


def _thin(points: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """At most _MAX_SVG_POINTS points, always keeping the ones where something changed."""
    if len(points) <= _MAX_SVG_POINTS:
        return list(points)
    step = len(points) / _MAX_SVG_POINTS
    keep = {int(i * step) for i in range(_MAX_SVG_POINTS)} | {len(points) - 1}
    return [p for i, p in enumerate(points) if i in keep]


def _polyline(points: Sequence[tuple[float, float]], color: str, dashed: bool = False) -> str:
    if not points:
        return ""
    coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    dash = ' stroke-dasharray="5,4"' if dashed else ""
    return (f'<polyline fill="none" stroke="{color}" stroke-width="1.6"{dash} '
            f'points="{coords}"/>')


def _steps(xs: Sequence[float], ys: Sequence[float]) -> list[tuple[float, float]]:
    """A step line: the value holds until the next record changes it."""
    out: list[tuple[float, float]] = []
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        if i:
            out.append((x, out[-1][1]))
        out.append((x, y))
    return out


def _chart(title: str, xs: list[float], series: list[tuple[str, str, list[float], bool]],
           spans: list[tuple[float, float]], marks: list[float]) -> str:
    values = [v for _n, _c, ys, _d in series for v in ys] or [0.0]
    low, high = min(min(values), 0.0), max(max(values), 1.0)
    x0, x1 = (min(xs), max(xs)) if xs else (0.0, 1.0)
    x_span = (x1 - x0) or 1.0

    def sx(x: float) -> float:
        return _PAD + (x - x0) / x_span * (_WIDTH - 2 * _PAD)

    def sy(y: float) -> float:
        return _HEIGHT - 18 - (y - low) / ((high - low) or 1.0) * (_HEIGHT - 36)

    body = [f'<rect x="{sx(a):.1f}" y="10" width="{max(sx(b) - sx(a), 2):.1f}" '
            f'height="{_HEIGHT - 28}" fill="#ffe7b3"/>' for a, b in spans]
    body += [f'<line x1="{sx(m):.1f}" x2="{sx(m):.1f}" y1="8" y2="{_HEIGHT - 16}" '
             'stroke="#cf222e" stroke-width="2"/>' for m in marks]
    legend = []
    for index, (name, color, ys, dashed) in enumerate(series):
        body.append(_polyline(_steps([sx(x) for x in xs], [sy(y) for y in ys]), color, dashed))
        legend.append(f'<text x="{_PAD + 150 * index}" y="{_HEIGHT - 3}" font-size="11" '
                      f'fill="{color}">{_esc(name)}</text>')
    axis = (f'<text x="2" y="{sy(high) + 4:.0f}" font-size="10">{high:g}</text>'
            f'<text x="2" y="{sy(low):.0f}" font-size="10">{low:g}</text>'
            f'<text x="{_WIDTH - 260}" y="12" font-size="10">offsets {x0:.0f} .. {x1:.0f}</text>')
    return (f'<div class=small>{_esc(title)}</div><svg width="{_WIDTH}" height="{_HEIGHT}" '
            f'xmlns="http://www.w3.org/2000/svg">{"".join(body)}{axis}{"".join(legend)}</svg>')


def _timeline(partition: str, rows: list[dict[str, Any]]) -> str:
    points = _thin([r for r in rows if r["kind"] == "point"])
    marks = [float(r["offset"]) for r in rows if r["kind"] == "violation"]
    if not points:
        return f"<h3>{_esc(partition)}</h3><p>no state replayed</p>"
    xs = [float(p["offset"]) for p in points]
    spans: list[tuple[float, float]] = []
    start: float | None = None
    for p in points:
        if p["recovering"] and start is None:
            start = float(p["offset"])
        elif not p["recovering"] and start is not None:
            spans.append((start, float(p["offset"])))
            start = None
    if start is not None:
        spans.append((start, xs[-1]))
    leaders = _chart("leader (-1: none) and leader epoch; RECOVERING shaded, violations red",
                     xs, [("leader", "#0969da", [float(p["leader"]) for p in points], False),
                          ("leader epoch", "#8250df",
                           [float(p["leader_epoch"]) for p in points], False)], spans, marks)
    sizes = _chart("ISR and ELR size against the min ISR in force", xs,
                   [("ISR size", "#1a7f37", [float(p["isr_size"]) for p in points], False),
                    ("ELR size", "#bc4c00", [float(p["elr_size"]) for p in points], False),
                    ("min ISR", "#6e7781", [float(p["min_isr"]) for p in points], True)],
                   spans, marks)
    last = points[-1]
    return (f"<h3>Partition {_esc(partition)}</h3><div class=small>{len(points)} states shown; "
            f"last: leader {last['leader']}, leader epoch {last['leader_epoch']}, partition "
            f"epoch {last['partition_epoch']}</div>{leaders}{sizes}")


def _hwm_timeline(partition: str, events: list[dict[str, Any]]) -> str:
    """A data partition from the broker journals: HWM and ISR size against min ISR (rule 20) over
    time; leader changes and truncations (the faults the journals show) marked in red,
    RECOVERING (KIP-704, rule 21) shaded."""
    advances = _thin([e for e in events if e["event"] == "HwmAdvanced"])
    if not advances:
        return ""
    t0 = float(min(e["ts"] or 0 for e in events))
    xs = [(float(e["ts"] or 0) - t0) / 1000.0 for e in advances]
    marks = [(float(e["ts"] or 0) - t0) / 1000.0 for e in events
             if e["event"] == "Truncated" or (e["event"] == "RoleChanged"
                                              and e["role"] == "leader")]
    spans: list[tuple[float, float]] = []
    start: float | None = None
    for e in events:
        if e["event"] != "RecoveryStateChanged":
            continue
        at = (float(e["ts"] or 0) - t0) / 1000.0
        if e["new_state"] == 1 and start is None:
            start = at
        elif e["new_state"] != 1 and start is not None:
            spans.append((start, at))
            start = None
    if start is not None:
        spans.append((start, xs[-1] if xs else start))
    hwm = _chart("high watermark (seconds since the first event; red: leader change or "
                 "truncation)", xs,
                 [("HWM", "#0969da", [float(e["new"] or 0) for e in advances], False)],
                 spans, marks)
    sizes = _chart("committed ISR size at each HWM advance against min ISR (rule 20)", xs,
                   [("ISR size", "#1a7f37", [float(e["isr_size"] or 0) for e in advances], False),
                    ("min ISR", "#6e7781", [float(e["min_isr"] or 0) for e in advances], True)],
                   spans, marks)
    truncations = sum(e["event"] == "Truncated" for e in events)
    return (f"<h3>{_esc(partition)}</h3><div class=small>{len(advances)} HWM advances shown, "
            f"last HWM {advances[-1]['new']}, {truncations} truncation(s)</div>{hwm}{sizes}")


def _attributed(result: AuditResult) -> str:
    rows = [f"<tr><td>{_esc(v.get('message'))}</td><td>{_esc(v.get('partition'))}</td>"
            f"<td>{_esc(v.get('offset'))}</td></tr>"
            for rule in result.rules for v in rule.attributed[:_MAX_VIOLATIONS_SHOWN]]
    if not rows:
        return ""
    return ("<h2>Losses attributed to unclean or designated elections (rule 23)</h2><table>"
            "<tr><th>write</th><th>partition</th><th>acked offset</th></tr>"
            + "".join(rows) + "</table>")


def render_html(result: AuditResult) -> str:
    verdict_class = "ok" if result.clean else "bad"
    inputs = result.inputs
    corrupt_rows = "".join(
        f"<tr><td>{_esc(r.get('node'))}</td><td><code>{_esc(r.get('file'))}</code></td>"
        f"<td>{_esc(r.get('position'))}</td><td>{_esc(r.get('corrupt_reason'))}</td></tr>"
        for r in inputs.get("corrupt_rows", []))
    corrupt = ("<h2>Corrupt input</h2><table><tr><th>node</th><th>file</th><th>byte</th>"
               f"<th>reason</th></tr>{corrupt_rows}</table>" if corrupt_rows else "")
    timelines = "".join(_timeline(name, rows) for name, rows in sorted(
        result.timelines.items(),
        key=lambda item: (-sum(r["kind"] == "violation" for r in item[1]), item[0])))
    hwm = "".join(_hwm_timeline(name, events) for name, events in
                  sorted(getattr(result, "hwm_timelines", {}).items()))
    return (
        "<!doctype html><html><head><meta charset=utf-8><title>minikraft audit</title>"
        f"<style>{_CSS}</style></head><body>"
        f"<h1>minikraft audit: <span class={verdict_class}>{_esc(result.verdict)}</span></h1>"
        f"<p class=small>{_esc(result.directory)}: {inputs.get('files')} files, "
        f"{inputs.get('records')} records, {inputs.get('corrupt')} corrupt, "
        f"{inputs.get('nodes')} nodes; {result.elapsed_s:.1f} s</p>"
        f"<h2>Rules (INVARIANTS.md)</h2>{_summary(result)}"
        f"<h2>Violations</h2>{_violations(result)}{_attributed(result)}{corrupt}"
        f"<h2>Partition timelines</h2>{timelines or '<p>no partitions</p>'}"
        f"<h2>Data partitions: high watermark (broker journals)</h2>"
        f"{hwm or '<p>no broker journals</p>'}"
        "</body></html>\n")
