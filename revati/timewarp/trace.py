"""Chrome trace output: the Timekeeper's jumps and every process's GPU work, merged."""

from __future__ import annotations

import json
from pathlib import Path


def merge_trace(trace_dir: Path, out: Path) -> int:
    """Merge the per-process JSON-lines files of a run into one Chrome trace; returns the
    number of events. Timestamps are virtual CLOCK_MONOTONIC microseconds."""
    events: list[dict] = [
        {"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "timekeeper"}},
    ]
    for part in sorted(trace_dir.glob("*.jsonl")):
        for line in part.read_text().splitlines():
            if line.strip():
                events.append(json.loads(line))
    out.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ns"}))
    return len(events)
