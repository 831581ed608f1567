"""The same answer on any host? (issue #24, item 2; with --tp 2, issue #26, item 1)

Replays real vLLM runs on the H200 (`revati validate`) with this host in three states:
quiet; one busy process pinned to each core, competing at the same priority (as .ci/stress
does); and the whole run pinned to one core (`taskset -c 0`). Prints, per load, the median
of --repeat runs of mean TTFT, mean TPOT and output throughput in each state, beside the
quiet state and beside the real run.

    .venv/bin/python tools/fidelity/host_states.py --out OUT [--states quiet,busy,one-core]
        [--loads decode_heavy,streams40,saturating] [--repeat 3] [--tp 1] [--model llama3_8b]

The real runs are Llama-3.1-8B at TP 1: with --tp 2 or more, or another --model, read the
columns against quiet only (issue #26 asks the emulated layouts to agree between one core
and two, not with a TP 1 run).

Runs are kept in OUT/<state>_<load>_<i> and reused when their validation.json exists, so an
interrupted run resumes. Each takes minutes on 2 cores; one-core and busy ones longer.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from replay import METRICS, REAL_MODEL, VLLM_KNOBS, VLLM_LLAMA, replay

# the real H200 runs (vLLM 0.26.0, Llama-3.1-8B, TP 1, --max-model-len 4096)
LOADS = {"decode_heavy": VLLM_LLAMA / "2026-12-02-real-check" / "decode_heavy.json",
         "streams40": VLLM_KNOBS / "default_streams40.json.gz",
         "saturating": VLLM_KNOBS / "default_saturating.json.gz"}
STATES = ("quiet", "busy", "one-core")


def run(state: str, load: str, tp: int, model: str, out: Path
        ) -> dict[str, tuple[float, float]]:
    """metric -> (real, emulated) of one run, running it unless kept."""
    if (out / "validation.json").is_file():
        return replay(LOADS[load], out)
    prefix = ["taskset", "-c", str(min(os.sched_getaffinity(0)))] if state == "one-core" else []
    busy = []
    if state == "busy":  # one per core, pinned there: the scheduler cannot move it away
        busy = [subprocess.Popen(["taskset", "-c", str(c), sys.executable, "-c",
                                  "while True: pass"]) for c in os.sched_getaffinity(0)]
    try:
        return replay(LOADS[load], out, bench_args=["--tp", str(tp)], prefix=prefix,
                      model=model)
    finally:
        for p in busy:
            p.kill()
            p.wait()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--states", default=",".join(STATES))
    p.add_argument("--loads", default=",".join(LOADS))
    p.add_argument("--repeat", type=int, default=3, help="runs per cell (their median)")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--model", default=REAL_MODEL, help="a catalog model (revati/conf/model)")
    args = p.parse_args()
    states, loads = args.states.split(","), args.loads.split(",")
    for load in loads:
        cells = {}
        for s in states:
            runs = [run(s, load, args.tp, args.model, args.out / f"{s}_{load}_{i}")
                    for i in range(args.repeat)]
            cells[s] = {m: (runs[0][m][0], statistics.median(r[m][1] for r in runs),
                            min(r[m][1] for r in runs), max(r[m][1] for r in runs))
                        for m, _ in METRICS}
        base = cells.get("quiet")
        print(f"\n## {load} ({args.model}, TP {args.tp}, median of {args.repeat}; "
              "[min-max])\n")
        print("| state | " + " | ".join(f"{label} | vs quiet | vs real" for _, label in METRICS)
              + " |")
        print("|---|" + "---:|" * 3 * len(METRICS))
        for s, c in cells.items():
            parts = []
            for m, _ in METRICS:
                real, med, lo, hi = c[m]
                vs_quiet = f"{(med / base[m][1] - 1) * 100:+.1f} %" if base else "n/a"
                parts.append(f"{med:.2f} [{lo:.2f}-{hi:.2f}] | {vs_quiet} | "
                             f"{(med / real - 1) * 100:+.1f} %")
            print(f"| {s} | " + " | ".join(parts) + " |")
        print("\nreal: " + ", ".join(f"{label} {next(iter(cells.values()))[m][0]:.2f}"
                                     for m, label in METRICS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
