"""Where the first token of each request spent its time, segment by segment, from a `vllm bench
serve --save-detailed` result and the events tools/fidelity/vllm_request_path/ recorded on the
server that served it (real GPU or emulated: under `revati bench`/`revati validate` every
clock is the virtual one, so the segments are what the emulator says they took).

    .venv/bin/python tools/fidelity/request_path.py RESULT.json[.gz] EVENTS_DIR

The client sends at its start time and has the first token at start + TTFT; in between, the
server's events (see the sitecustomize) cut the path into segments. Requests are matched in
order of arrival (the events of one kind, from the first request's send on, are taken in
time order; a load whose requests overtake each other on the way in reads wrong). Prints each
segment's mean, p10, median and p90 in ms, and the mean TTFT they add up to.
"""

from __future__ import annotations

import itertools
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from revati.bench.compare import read_result

PATH = ("api_in", "api_add", "core_recv", "core_add", "core_first", "api_first")


def segments(result: dict, events_dir: Path) -> dict[str, list[float]]:
    """Per segment of the path (named 'from -> to'), each request's time in it, in ms."""
    offsets = sorted(events_dir.glob("offset.*"))
    if not offsets:
        sys.exit(f"request_path: no offset.* in {events_dir}: was the server started with "
                 "tools/fidelity/vllm_request_path/ on its PYTHONPATH?")
    offset_s = float(offsets[0].read_text())
    sends = sorted((s + offset_s) * 1e3 for s in result["start_times"])
    firsts = sorted((s + offset_s + t) * 1e3 for s, t in zip(result["start_times"],
                                                            result["ttfts"], strict=True))
    seen: dict[str, list[float]] = defaultdict(list)
    for f in events_dir.glob("events.*.tsv"):
        for line in f.read_text().splitlines():
            event, t_ms, _ = line.split("\t")
            seen[event].append(float(t_ms))
    points = {"client_send": sends}
    for event in PATH:
        points[event] = sorted(t for t in seen[event] if t >= sends[0])[: len(sends)]
        if len(points[event]) < len(sends):
            sys.exit(f"request_path: {len(points[event])} '{event}' events after the first "
                     f"send, for {len(sends)} requests")
    points["client_first"] = firsts
    names = list(points)
    return {f"{a} -> {b}": [y - x for x, y in zip(points[a], points[b], strict=True)]
            for a, b in itertools.pairwise(names)}


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    result = read_result(Path(sys.argv[1]))
    parts = segments(result, Path(sys.argv[2]))
    print(f"{'segment':<28} {'mean':>7} {'p10':>7} {'median':>7} {'p90':>7}")
    for name, ms in parts.items():
        q = statistics.quantiles(ms, n=10)
        print(f"{name:<28} {statistics.mean(ms):7.2f} {q[0]:7.2f} {statistics.median(ms):7.2f} "
              f"{q[-1]:7.2f}")
    total = sum(statistics.mean(ms) for ms in parts.values())
    print(f"{'TTFT (sum of the means)':<28} {total:7.2f}")


if __name__ == "__main__":
    main()
