"""The audit's report: OUT/audit.json (the verdict, corruption evidence, per rule the checked count
and violations with evidence, the inputs, per-partition tallies) and OUT/index.html,
self-contained (inline CSS and SVG, no network): the verdict; an index of where to look first
(corruption, then partitions by violations, time without a leader, time under min ISR); the
rules and violations; per-partition timelines over time of leader, leader epoch and ISR/ELR
size against min ISR, named by topic, with no-leader / under-min-ISR / RECOVERING spans shaded
and every chaos fault (coloured by kind) and metadata quorum election drawn on every chart."""

from __future__ import annotations

import html
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analytics.report.audit_result import AuditResult

AUDIT_JSON = "audit.json"
INDEX_HTML = "index.html"
_WIDTH, _HEIGHT, _PAD = 900, 120, 34
_MAX_VIOLATIONS_SHOWN = 50
_MAX_SVG_POINTS = 600
_INDEX_ROWS = 20

_CSS = """
body{font:14px system-ui,sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;margin:8px 0 20px}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}
th{background:#f3f3f3}.ok{color:#1a7f37;font-weight:600}.bad{color:#cf222e;font-weight:600}
.small{font-size:12px;color:#555}svg{background:#fafafa;border:1px solid #ddd;margin:2px 0}
code{font-size:12px}tr.bad td{background:#fff0ee}
.legend{font-size:12px}.swatch{display:inline-block;width:14px;height:0;border-top:3px dashed;
margin:0 4px 3px 10px}.fill{display:inline-block;width:14px;height:10px;margin:0 4px 0 10px}
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


def _table(headers: Sequence[str], rows: Iterable[str], attributes: str = "") -> str:
    """A table with a header row; `rows` are whole <tr> elements."""
    head = "".join(f"<th>{h}</th>" for h in headers)
    return f"<table{attributes}><tr>{head}</tr>" + "".join(rows) + "</table>"


def _summary(result: AuditResult) -> str:
    rows = []
    for rule in result.rules:
        status = ("<span class=ok>clean</span>" if not rule.violation_count
                  else f"<span class=bad>{rule.violation_count} violation(s)</span>")
        rows.append(f"<tr><td>{rule.rule}</td><td>{_esc(rule.name)}</td>"
                    f"<td>{rule.checked}</td><td>{status}</td></tr>")
    return _table(("rule", "what", "checked", "result"), rows)


def _violations(result: AuditResult) -> str:
    parts = []
    for rule in result.rules:
        if not rule.violations:
            continue
        rows = [f"<tr><td>{_esc(v.get('message'))}</td><td>{_esc(v.get('partition'))}</td>"
                f"<td>{_esc(v.get('node'))}</td><td>{_esc(v.get('offset'))}</td>"
                f"<td><code>{_esc(v.get('file'))}</code></td></tr>"
                for v in rule.violations[:_MAX_VIOLATIONS_SHOWN]]
        parts.append(f"<h3>Rule {rule.rule}: {_esc(rule.name)}</h3>"
                     + _table(("violation", "partition", "node", "offset", "file"), rows))
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


# Fault kinds by the first word of a chaos event's action (cluster/chaos: kill, pause, resume,
# partition, heal-network, netem, restart, terminate, ...); anything else is drawn grey.
FAULT_COLORS = {"kill": "#d1242f", "terminate": "#d1242f", "pause": "#bf8700",
                "resume": "#d4a72c", "partition": "#8250df", "netem": "#a475f9",
                "restart": "#1a7f37", "heal": "#57606a"}
OTHER_FAULT_COLOR = "#57606a"
ELECTION_COLOR = "#00838f"
VIOLATION_COLOR = "#cf222e"
UNAVAILABLE_FILL = "#ffd8d3"
UNDER_MIN_ISR_FILL = "#ffe7b3"
RECOVERING_FILL = "#ddf4ff"


def fault_kind(action: Any) -> str:
    word = str(action or "").lower().replace("_", "-").split("-")[0]
    return word if word in FAULT_COLORS else "other"


def fault_color(action: Any) -> str:
    return FAULT_COLORS.get(fault_kind(action), OTHER_FAULT_COLOR)


@dataclass(frozen=True)
class Marks:
    """What every time chart draws besides its series: chaos faults and elections."""

    faults: list[dict[str, Any]]  # {"ts_ms", "action", "node", ...} from the chaos journals
    elections: list[dict[str, Any]]  # {"ts_ms", "epoch", "leader"}: metadata quorum elections

    def times(self) -> list[float]:
        return [float(f["ts_ms"]) for f in self.faults if f.get("ts_ms") is not None] + [
            float(e["ts_ms"]) for e in self.elections if e.get("ts_ms") is not None]


def _clock(ms: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ms / 1000.0))


def _chart(title: str, t0: float, t1: float,
           series: list[tuple[str, str, list[float], list[float], bool]],
           spans: list[tuple[float, float, str]], marks: Marks,
           violations: list[float]) -> str:
    """One SVG chart over time (ms): step lines, shaded spans, a dashed vertical line per chaos
    fault (coloured by kind), a blue tick per election, a red triangle per violation."""
    values = [v for _n, _c, _x, ys, _d in series for v in ys] or [0.0]
    low, high = min(min(values), 0.0), max(max(values), 1.0)
    span = (t1 - t0) or 1.0
    top, bottom = 16, _HEIGHT - 30

    def sx(t: float) -> float:
        return _PAD + (t - t0) / span * (_WIDTH - 2 * _PAD)

    def sy(y: float) -> float:
        return bottom - (y - low) / ((high - low) or 1.0) * (bottom - top)

    body = [f'<rect x="{sx(a):.1f}" y="{top}" width="{max(sx(b) - sx(a), 2):.1f}" '
            f'height="{bottom - top}" fill="{color}"/>' for a, b, color in spans]
    def placed(items: Sequence[dict[str, Any]]) -> list[tuple[float, dict[str, Any]]]:
        """The marks within the chart's time, each with its x."""
        return [(sx(float(m["ts_ms"])), m) for m in items
                if m.get("ts_ms") is not None and t0 <= m["ts_ms"] <= t1]

    for x, f in placed(marks.faults):
        body.append(f'<line class="fault fault-{fault_kind(f.get("action"))}" x1="{x:.1f}" '
                    f'x2="{x:.1f}" y1="{top - 4}" y2="{bottom}" stroke="{fault_color(f.get("action"))}" '
                    f'stroke-width="3" stroke-dasharray="6,3"><title>{_esc(f.get("action"))} '
                    f'{_esc(f.get("node") or "")} at {_clock(f["ts_ms"])}</title></line>')
    for x, e in placed(marks.elections):
        body.append(f'<line class="election" x1="{x:.1f}" x2="{x:.1f}" y1="{top - 6}" '
                    f'y2="{top + 8}" stroke="{ELECTION_COLOR}" stroke-width="3"><title>election: '
                    f'epoch {_esc(e.get("epoch"))}, leader {_esc(e.get("leader"))}</title></line>')
    body += [f'<path class="violation" d="M{sx(v) - 6:.1f},{top - 6} h12 l-6,10 z" '
             f'fill="{VIOLATION_COLOR}"/>' for v in violations if t0 <= v <= t1]
    legend = []
    for index, (name, color, xs, ys, dashed) in enumerate(series):
        body.append(_polyline(_steps([sx(x) for x in xs], [sy(y) for y in ys]), color, dashed))
        legend.append(f'<text x="{_PAD + 130 * index}" y="{_HEIGHT - 3}" font-size="11" '
                      f'fill="{color}">{_esc(name)}</text>')
    ticks = []
    for i in range(6):
        t = t0 + span * i / 5
        ticks.append(f'<text x="{sx(t) - 12:.0f}" y="{bottom + 12}" font-size="10" '
                     f'fill="#555">{(t - t0) / 1000.0:.1f}s</text>')
    axis = (f'<text x="2" y="{sy(high) + 4:.0f}" font-size="10">{high:g}</text>'
            f'<text x="2" y="{sy(low):.0f}" font-size="10">{low:g}</text>'
            f'<text x="{_WIDTH - 300}" y="11" font-size="10" fill="#555">time since '
            f'{_clock(t0)} UTC</text>')
    return (f'<div class=small>{_esc(title)}</div><svg width="{_WIDTH}" height="{_HEIGHT}" '
            f'xmlns="http://www.w3.org/2000/svg">{"".join(body)}{axis}{"".join(ticks)}'
            f'{"".join(legend)}</svg>')


def _time_range(xs: list[float], marks: Marks) -> tuple[float, float]:
    """The points' time range, widened to the faults and elections near it (a fault shortly
    before a partition's first recorded change is what explains that change)."""
    t0, t1 = min(xs), max(xs)
    near = [t for t in marks.times() if t0 - (t1 - t0) * 0.25 <= t <= t1 + (t1 - t0) * 0.25]
    return min([t0, *near]), max([t1, *near])


def _spans(points: list[dict[str, Any]], xs: list[float], test: Any, color: str
           ) -> list[tuple[float, float, str]]:
    out: list[tuple[float, float, str]] = []
    start: float | None = None
    for p, x in zip(points, xs, strict=True):
        if test(p) and start is None:
            start = x
        elif not test(p) and start is not None:
            out.append((start, x, color))
            start = None
    if start is not None:
        out.append((start, xs[-1], color))
    return out


def _timeline(anchor: str, title: str, rows: list[dict[str, Any]], marks: Marks) -> str:
    points = _thin([r for r in rows if r["kind"] == "point"
                    and r.get("batch_timestamp_ms") is not None])
    if not points:
        return f"<h3 id={anchor}>{_esc(title)}</h3><p>no state replayed</p>"
    xs = [float(p["batch_timestamp_ms"]) for p in points]
    violations = [float(r["batch_timestamp_ms"]) for r in rows
                  if r["kind"] == "violation" and r.get("batch_timestamp_ms") is not None]
    t0, t1 = _time_range(xs, marks)
    spans = (_spans(points, xs, lambda p: p["leader"] == -1, UNAVAILABLE_FILL)
             + _spans(points, xs, lambda p: p["leader"] != -1 and p["isr_size"] < p["min_isr"],
                      UNDER_MIN_ISR_FILL)
             + _spans(points, xs, lambda p: p["recovering"], RECOVERING_FILL))
    leaders = _chart("leader (-1: none) and leader epoch", t0, t1,
                     [("leader", "#0969da", xs, [float(p["leader"]) for p in points], False),
                      ("leader epoch", "#8250df", xs,
                       [float(p["leader_epoch"]) for p in points], False)], spans, marks,
                     violations)
    sizes = _chart("ISR and ELR size against the min ISR in force", t0, t1,
                   [("ISR size", "#1a7f37", xs, [float(p["isr_size"]) for p in points], False),
                    ("ELR size", "#bc4c00", xs, [float(p["elr_size"]) for p in points], False),
                    ("min ISR", "#6e7781", xs, [float(p["min_isr"]) for p in points], True)],
                   spans, marks, violations)
    last = points[-1]
    return (f"<h3 id={anchor}>Partition {_esc(title)}</h3><div class=small>{len(points)} "
            f"states shown; last: leader {last['leader']}, leader epoch {last['leader_epoch']}, "
            f"partition epoch {last['partition_epoch']}</div>{leaders}{sizes}")


def _hwm_timeline(partition: str, events: list[dict[str, Any]], marks: Marks) -> str:
    """A data partition from the broker journals: HWM and ISR size against min ISR (rule 20) over
    time; leader changes and truncations as journal marks, RECOVERING (KIP-704, rule 21)
    shaded, chaos faults and elections as on every chart."""
    advances = _thin([e for e in events if e["event"] == "HwmAdvanced" and e["ts"] is not None])
    if not advances:
        return ""
    xs = [float(e["ts"]) for e in advances]
    t0, t1 = _time_range(xs, marks)
    journal_marks = [float(e["ts"]) for e in events if e["ts"] is not None and (
        e["event"] == "Truncated" or (e["event"] == "RoleChanged" and e["role"] == "leader"))]
    spans: list[tuple[float, float, str]] = []
    start: float | None = None
    for e in events:
        if e["event"] != "RecoveryStateChanged" or e["ts"] is None:
            continue
        if e["new_state"] == 1 and start is None:
            start = float(e["ts"])
        elif e["new_state"] != 1 and start is not None:
            spans.append((start, float(e["ts"]), RECOVERING_FILL))
            start = None
    if start is not None:
        spans.append((start, xs[-1], RECOVERING_FILL))
    hwm = _chart("high watermark (red triangles: leader change or truncation in the journals)",
                 t0, t1, [("HWM", "#0969da", xs, [float(e["new"] or 0) for e in advances],
                           False)], spans, marks, journal_marks)
    sizes = _chart("committed ISR size at each HWM advance against min ISR (rule 20)", t0, t1,
                   [("ISR size", "#1a7f37", xs, [float(e["isr_size"] or 0) for e in advances],
                     False),
                    ("min ISR", "#6e7781", xs, [float(e["min_isr"] or 0) for e in advances],
                     True)], spans, marks, journal_marks)
    truncations = sum(e["event"] == "Truncated" for e in events)
    return (f"<h3>{_esc(partition)}</h3><div class=small>{len(advances)} HWM advances shown, "
            f"last HWM {advances[-1]['new']}, {truncations} truncation(s)</div>{hwm}{sizes}")


def _attributed(result: AuditResult) -> str:
    rows = [f"<tr><td>{_esc(v.get('message'))}</td><td>{_esc(v.get('partition'))}</td>"
            f"<td>{_esc(v.get('offset'))}</td></tr>"
            for rule in result.rules for v in rule.attributed[:_MAX_VIOLATIONS_SHOWN]]
    if not rows:
        return ""
    return ("<h2>Losses attributed to unclean or designated elections (rule 23)</h2>"
            + _table(("write", "partition", "acked offset"), rows))


def _index(result: AuditResult) -> str:
    """Where to look first: corruption, then partitions by violations, time without a leader,
    time under min ISR, leader changes (each name links to its timeline when one is drawn);
    when nothing stands out, the first partition alone."""
    rows = [f"<tr class=bad><td>corruption</td><td>node {_esc(c.get('node'))}</td>"
            f"<td colspan=4>{_esc(c.get('message'))}</td></tr>" for c in result.corruption]
    drawn = set(result.timelines)
    for p in result.partitions[:_INDEX_ROWS]:
        if not (p["violations"] or p["unavailable_ms"] or p["under_min_isr_ms"]
                or p["leader_changes"]) and rows:
            break
        name = _esc(p["partition"])
        link = f"<a href='#{_anchor(p['key'])}'>{name}</a>" if p["key"] in drawn else name
        cls = " class=bad" if p["violations"] else ""
        rows.append(f"<tr{cls}><td>{link}</td><td>{p['violations']}</td>"
                    f"<td>{(p['unavailable_ms'] or 0) / 1000:.1f}</td>"
                    f"<td>{(p['under_min_isr_ms'] or 0) / 1000:.1f}</td>"
                    f"<td>{p['leader_changes']}</td><td>{p['states']}</td></tr>")
    if not rows:
        return "<p>no partitions replayed</p>"
    return _table(("partition", "violations", "no leader (s)", "under min ISR (s)",
                   "leader changes", "states"), rows, " id=index")


def _anchor(key: str) -> str:
    return "p-" + "".join(ch if ch.isalnum() else "-" for ch in key)


def _corruption(result: AuditResult) -> str:
    def table(items: list[dict[str, Any]]) -> str:
        return _table(("node", "file", "byte", "reason", "offsets"), (
            f"<tr><td>{_esc(c['node'])}</td><td><code>{_esc(c['file'])}</code></td>"
            f"<td>{_esc(c['byte'])}</td><td>{_esc(c['reason'])}</td>"
            f"<td>{_esc(c['offsets'][0])}..{_esc(c['offsets'][1])}</td></tr>" for c in items))

    out = ""
    if result.corruption:
        out += ("<h2 class=bad>Corruption (CRC or framing errors with valid data after them)"
                f"</h2>{table(result.corruption)}")
    if result.torn_tails:
        out += ("<h2>Torn tails (a crash's last batch; log recovery truncates it: not a "
                f"finding)</h2>{table(result.torn_tails)}")
    return out


def _legend(marks: Marks) -> str:
    kinds = sorted({fault_kind(f.get("action")) for f in marks.faults})
    items = [f'<span class=swatch style="border-color:{FAULT_COLORS.get(k, OTHER_FAULT_COLOR)}">'
             f"</span>{_esc(k)}" for k in kinds]
    items.append(f'<span class=swatch style="border-color:{ELECTION_COLOR}"></span>election')
    items.append(f'<span class=swatch style="border-color:{VIOLATION_COLOR}"></span>violation')
    items += [f'<span class=fill style="background:{c}"></span>{n}' for n, c in (
        ("no leader", UNAVAILABLE_FILL), ("under min ISR", UNDER_MIN_ISR_FILL),
        ("RECOVERING", RECOVERING_FILL))]
    faults = [f"<tr><td>{_clock(f['ts_ms'])}</td><td>{_esc(f.get('action'))}</td>"
              f"<td>{_esc(f.get('node'))}</td></tr>" for f in marks.faults[:100]]
    return (f"<p class=legend>{' '.join(items)}</p>"
            f"<p class=small>{len(marks.faults)} chaos fault(s), {len(marks.elections)} "
            "metadata quorum election(s)</p>"
            + ("<details><summary>faults</summary>"
               + _table(("time (UTC)", "fault", "node"), faults) + "</details>" if faults else ""))


def render_html(result: AuditResult) -> str:
    verdict_class = "ok" if result.clean else "bad"
    inputs = result.inputs
    marks = Marks(result.faults, result.elections)
    names = result.topic_names

    def title(key: str) -> str:
        topic_id, _, partition = key.rpartition("-")
        return f"{names.get(topic_id, topic_id)}-{partition}"

    order = {p["key"]: i for i, p in enumerate(result.partitions)}
    timelines = "".join(
        _timeline(_anchor(key), title(key), rows, marks)
        for key, rows in sorted(result.timelines.items(),
                                key=lambda item: (order.get(item[0], len(order)), item[0])))
    hwm = "".join(_hwm_timeline(name, events, marks) for name, events in
                  sorted(result.hwm_timelines.items()))
    return (
        "<!doctype html><html><head><meta charset=utf-8><title>minikraft audit</title>"
        f"<style>{_CSS}</style></head><body>"
        f"<h1>minikraft audit: <span id=verdict class={verdict_class}>"
        f"{_esc(result.verdict)}</span></h1>"
        f"<p class=small>{_esc(result.directory)}: {inputs.get('files')} files, "
        f"{inputs.get('records')} records, {inputs.get('corrupt')} corrupt, "
        f"{inputs.get('nodes')} nodes; {result.elapsed_s:.1f} s</p>"
        f"<h2>Look here first</h2>{_index(result)}{_corruption(result)}"
        f"<h2>Rules (INVARIANTS.md)</h2>{_summary(result)}"
        f"<h2>Violations</h2>{_violations(result)}{_attributed(result)}"
        f"<h2>Partition timelines</h2>{_legend(marks)}"
        f"{timelines or '<p>no partitions</p>'}"
        f"<h2>Data partitions: high watermark (broker journals)</h2>"
        f"{hwm or '<p>no broker journals</p>'}"
        "</body></html>\n")
