"""Benchmark rows and reports (CLI.md): `{"bench","peer","results":[{"metric","unit","better",
"minikraft","peer","ratio"}]}`, ratio = minikraft / peer, both measured in the same run; plus the
rich table, the markdown table and a dependency-free SVG chart for BENCHMARKS.md."""

from __future__ import annotations

import argparse
import html
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cluster.output import emit_table, stdout


def row(
    metric: str,
    unit: str,
    better: str,
    minikraft: float | None,
    peer: float | None = None,
) -> dict[str, Any]:
    """One line of a report; ratio only when both sides were measured (and the peer is not 0)."""
    ratio = None
    if minikraft is not None and peer is not None and peer != 0:
        ratio = float(f"{minikraft / peer:.4g}")  # significant figures: ratios span 0.005-200
    return {
        "metric": metric,
        "unit": unit,
        "better": better,
        "minikraft": None if minikraft is None else round(minikraft, 3),
        "peer": None if peer is None else round(peer, 3),
        "ratio": ratio,
    }


def make_report(
    bench: str,
    peer: str | None,
    results: Sequence[dict[str, Any]],
    notes: Sequence[str] = (),
    **extra: Any,
) -> dict[str, Any]:
    """The JSON document; `notes` say what is like-with-like (durability, client path) and
    `load_average` how busy the machine was at the end of the run."""
    return {
        "bench": bench,
        "peer": peer,
        "results": list(results),
        "notes": list(notes),
        "load_average": [round(v, 2) for v in os.getloadavg()],
        **extra,
    }


def speedup(result: dict[str, Any]) -> float | None:
    """How many times better minikraft is than the peer (>1 better, <1 worse), either way round."""
    ratio = result.get("ratio")
    if not ratio:
        return None
    return float(ratio) if result["better"] == "higher" else 1.0 / float(ratio)


def print_report(title: str, report: dict[str, Any]) -> None:
    """The rich table, then the like-with-like notes and the load average under it."""
    peer = report.get("peer") or "peer"
    goals = any("goal" in r for r in report["results"])  # bench kafka's lines carry theirs
    emit_table(
        title,
        ["metric", "unit", "better", "minikraft", peer, "ratio (ours/peer)"]
        + (["goal", "met"] if goals else []),
        [
            [r["metric"], r["unit"], r["better"], r["minikraft"], r["peer"], r["ratio"]]
            + ([r.get("goal") or "-", _met(r.get("goal_met"))] if goals else [])
            for r in report["results"]
        ],
    )
    notes = report.get("notes", [])
    load = report.get("load_average")
    for note in notes:
        stdout.print(f"note: {note}", highlight=False)
    if load:
        stdout.print(f"load average at the end of the run: {load}", highlight=False)


def _met(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "NO")


DURABILITY = {
    ("raft", "etcd"): "fsync per batch / fsync every commit",
    ("raft", "pysyncobj"): "no fsync / no fsync",
    ("failover", "etcd"): "fsync per batch / fsync every commit",
    ("produce", "nats"): "fsync per batch / no fsync",
}


def durability(report: dict[str, Any], result: dict[str, Any]) -> str:
    """What each side promises on disk when it acks, for the table beside every figure (a
    line that says its own, as `bench kafka`'s do, wins)."""
    if result.get("durability"):
        return str(result["durability"])
    if report["bench"] == "produce" and result["metric"].endswith("flush relaxed"):
        return "no fsync / no fsync"
    return DURABILITY.get((report["bench"], report.get("peer") or ""), "-")


def markdown_table(reports: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| bench | peer | metric | unit | better | minikraft | peer value | ratio (ours/peer) "
        "| durability (ours / peer) |",
        "|---|---|---|---|---|---:|---:|---:|---|",
    ]
    for report in reports:
        for r in report["results"]:
            lines.append(
                f"| {report['bench']} | {report.get('peer') or '-'} | {r['metric']} | {r['unit']} "
                f"| {r['better']} | {_fmt(r['minikraft'])} | {_fmt(r['peer'])} "
                f"| {_fmt(r['ratio'])} | {durability(report, r)} |"
            )
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    return "-" if value is None else str(value)


def write_svg_chart(reports: Sequence[dict[str, Any]], path: Path) -> None:
    """Horizontal bars of `speedup` on a log2 axis centred on 1x (parity): right of the line
    minikraft is better, left it is worse. Plain SVG because matplotlib is not a dependency."""
    bars = [
        (f"{rep['bench']} vs {rep['peer']}: {r['metric']}", value)
        for rep in reports
        for r in rep["results"]
        if (value := speedup(r)) is not None
    ]
    label_w, plot_w, bar_h, top = 500, 420, 22, 40
    width, height = label_w + plot_w + 90, top + bar_h * len(bars) + 40
    span = max([4.0] + [abs(math.log2(v)) for _label, v in bars])
    centre = label_w + plot_w / 2

    def x_of(value: float) -> float:
        return centre + math.log2(value) / span * (plot_w / 2)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        '<text x="10" y="20" font-size="14" font-weight="bold">minikraft vs peers: times '
        "better (right) or worse (left), log scale, same machine, same run</text>",
    ]
    for i, (label, value) in enumerate(bars):
        y = top + i * bar_h
        x = x_of(value)
        colour = "#2e7d32" if value >= 1 else "#c62828"
        parts.append(f'<text x="{label_w - 8}" y="{y + 15}" text-anchor="end">'
                     f"{html.escape(label)}</text>")
        parts.append(f'<rect x="{min(x, centre):.1f}" y="{y + 3}" width="{abs(x - centre):.1f}" '
                     f'height="{bar_h - 6}" fill="{colour}"/>')
        anchor_x = x + 4 if value >= 1 else x - 4
        anchor = "start" if value >= 1 else "end"
        parts.append(f'<text x="{anchor_x:.1f}" y="{y + 15}" text-anchor="{anchor}">'
                     f"{value:.2f}x</text>")
    axis_y = top + bar_h * len(bars) + 5
    parts.append(f'<line x1="{centre}" y1="{top - 5}" x2="{centre}" y2="{axis_y}" '
                 'stroke="black"/>')
    # Every step-th power of two, so that labels stay apart; worse-side ones as fractions.
    step = max(1, math.ceil(36 / (plot_w / 2 / span)))
    for tick in range(-int(span), int(span) + 1):
        if tick % step:
            continue
        tx = centre + tick / span * (plot_w / 2)
        label = f"{2 ** tick}x" if tick >= 0 else f"1/{2 ** -tick}x"
        parts.append(f'<text x="{tx:.1f}" y="{axis_y + 15}" text-anchor="middle">'
                     f"{label}</text>")
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n")


def table_reports(markdown: str, skip: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The reports of BENCHMARKS.md's latest table (its rows grouped by bench and peer), for a
    chart redrawn with one bench measured again: that bench's old rows (`skip`) left out."""
    section = markdown.split("## Latest table", 1)[1].split("\n## ", 1)[0]
    reports: dict[tuple[str, str], dict[str, Any]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 9 or cells[0] in ("bench", "---") or cells[0] in skip:
            continue
        bench, peer, metric, unit, better, ours, theirs, _ratio, durable = cells
        report = reports.setdefault((bench, peer), {"bench": bench, "peer": peer, "results": []})
        line_row = row(metric, unit, better, _number(ours), _number(theirs))
        line_row["durability"] = durable
        report["results"].append(line_row)
    return list(reports.values())


def _number(cell: str) -> float | None:
    return None if cell == "-" else float(cell)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m cluster.bench.report --svg benchmarks.svg a.json b.json`: the markdown table
    of the `bench --output json` documents given, and the chart. `--table BENCHMARKS.md`: the
    latest table's rows first, but those of the benches given again."""
    parser = argparse.ArgumentParser()
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--svg", type=Path, default=None)
    parser.add_argument("--table", type=Path, default=None)
    args = parser.parse_args(argv)
    reports = [json.loads(path.read_text()) for path in args.reports]
    for report in reports:  # ratios from the figures, so older reports render alike
        report["results"] = [
            {**row(r["metric"], r["unit"], r["better"], r["minikraft"], r["peer"]),
             **({"durability": r["durability"]} if r.get("durability") else {})}
            for r in report["results"]
        ]
    if args.table is not None:
        given = [r["bench"] for r in reports]
        reports = table_reports(args.table.read_text(), skip=given) + reports
    print(markdown_table(reports))
    if args.svg is not None:
        write_svg_chart(reports, args.svg)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
