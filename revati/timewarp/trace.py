"""Chrome trace output: the Timekeeper's jumps and every process's GPU work, merged."""

from __future__ import annotations

import json
import logging
from pathlib import Path

log = logging.getLogger("revati.trace")


def merge_trace(trace_dir: Path, out: Path) -> int:
    """Merge the per-process JSON-lines files of a run into one Chrome trace; returns the
    number of events. Timestamps are virtual CLOCK_MONOTONIC microseconds."""
    events: list[dict] = [
        {"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "timekeeper"}},
    ]
    for part in sorted(trace_dir.glob("*.jsonl")):
        for line in part.read_text(errors="replace").splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                # the last line of a process killed while writing it
                log.warning("%s: skipped an incomplete trace event", part.name)
    out.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ns"}))
    return len(events)
