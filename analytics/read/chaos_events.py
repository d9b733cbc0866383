"""The chaos faults a cluster directory records, for the report's timelines.

`minikraft chaos` writes one summary per run, `D/chaos/<scenario>-s<seed>-<run>.json`, whose
"faults" list holds one event per fault: `{"ts_ms", "action", "node", ...}` (kill, pause,
resume, partition, heal-network, netem, restart, terminate, ...). Newline-delimited JSON files
of such events (`D/chaos/*.jsonl`) are read too. The kinds are not interpreted here (the report
colours them by their first word), so new fault kinds show up without a change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CHAOS_DIR_NAME = "chaos"
MAX_FAULTS = 5000


def _event(raw: Any, source: str) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        return None
    ts = raw.get("ts_ms", raw.get("ts"))
    action = raw.get("action", raw.get("kind", raw.get("fault")))
    if not isinstance(ts, (int, float)) or isinstance(ts, bool) or not isinstance(action, str):
        return None
    out = {k: v for k, v in raw.items() if isinstance(v, (str, int, float, bool, list))}
    out.update(ts_ms=int(ts), action=action, source=source)
    return out


def read_chaos_faults(root: str | Path) -> list[dict[str, Any]]:
    """Every fault event under every `chaos/` directory below root, by time (at most
    MAX_FAULTS); unreadable or foreign files are skipped, never fatal."""
    base = Path(root)
    dirs = [base] if base.name == CHAOS_DIR_NAME else []
    dirs += sorted(p for p in base.rglob(CHAOS_DIR_NAME) if p.is_dir())
    events: list[dict[str, Any]] = []
    for directory in dirs:
        for path in sorted(directory.iterdir()):
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            raws: list[Any] = []
            if path.suffix == ".json":
                try:
                    doc = json.loads(text)
                except ValueError:
                    continue
                if isinstance(doc, dict) and isinstance(doc.get("faults"), list):
                    raws = doc["faults"]
            elif path.suffix == ".jsonl":
                for line in text.splitlines():
                    try:
                        raws.append(json.loads(line))
                    except ValueError:
                        continue
            events += [e for e in (_event(r, path.name) for r in raws) if e is not None]
    events.sort(key=lambda e: e["ts_ms"])
    return events[:MAX_FAULTS]
