"""The README's fidelity table for one engine: the four Llama-3.1-8B loads of
docs/validation.md replayed through `revati validate` against their real H200 runs on this
host, printed as a markdown table of errors (emulated against real): with --repeat N, the
median of N runs per load with their range. With --hardware h100, vLLM's four loads against
real runs on an H100, emulated as one.

    PYTHONPATH=. .venv/bin/python tools/fidelity/loads.py --engine vllm|sglang --out OUT \
        [--hardware h200|h100] [--cpu-dilation auto|off|F] [--repeat N]

Runs are kept in OUT/<load>/ (and OUT/<load>_1/, ... for the repeats: replay.run_folders)
and reused (replay.py), so an interrupted script resumes; run it on a quiet host and give
`python -m revati.hostspeed` beside the table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from replay import SGLANG_LLAMA, VLLM_LLAMA, replay, run_folders

# (engine, GPU) -> load -> the real run it replays (validation/README.md)
VLLM_H100 = VLLM_LLAMA / "2026-12-06-real-h100"
REAL = {
    ("vllm", "h200"): {
        "decode_heavy": VLLM_LLAMA / "2026-12-01-real-warm" / "decode_heavy.json",
        "prefill_heavy": VLLM_LLAMA / "2026-12-01-real-warm" / "prefill_heavy.json",
        "mixed_moderate": VLLM_LLAMA / "2026-12-02-real-steps" / "mixed_moderate.json",
        "mixed_saturating": (VLLM_LLAMA / "2026-12-03-real-steps-saturating"
                             / "mixed_saturating.json")},
    ("vllm", "h100"): {load: VLLM_H100 / f"{load}.json.gz" for load in
                       ("decode_heavy", "prefill_heavy", "mixed_moderate", "mixed_saturating")},
    ("sglang", "h200"): {
        "decode_heavy": SGLANG_LLAMA / "2026-12-03-real-profiled" / "decode_heavy.json",
        "prefill_heavy": SGLANG_LLAMA / "2026-12-03-real-profiled" / "prefill_heavy.json",
        "mixed_moderate": SGLANG_LLAMA / "2026-12-03-real-moderate" / "mixed_moderate.json",
        "mixed_saturating": (SGLANG_LLAMA / "2026-12-03-real-profiled"
                             / "mixed_saturating.json")},
}
COLUMNS = ("mean_ttft_ms", "mean_tpot_ms", "output_throughput", "p99_ttft_ms", "p99_itl_ms")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engine", choices=sorted({e for e, _ in REAL}), required=True)
    p.add_argument("--hardware", choices=sorted({h for _, h in REAL}), default="h200")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--cpu-dilation", default="auto", metavar="auto|off|F",
                   help="revati validate's --cpu-dilation (docs/timewarp.md)")
    p.add_argument("--repeat", type=int, default=1, help="runs per load (median, range)")
    args = p.parse_args()
    if (args.engine, args.hardware) not in REAL:
        p.error(f"no real {args.engine} runs on the {args.hardware} to replay")
    if args.repeat < 1:
        p.error(f"--repeat {args.repeat}: at least one run per load")
    print(f"| load | {' | '.join(COLUMNS)} |\n|---|{'---:|' * len(COLUMNS)}")
    for load, real in REAL[args.engine, args.hardware].items():
        runs = [replay(real, out, ["--cpu-dilation", args.cpu_dilation], engine=args.engine,
                       metrics=COLUMNS, hardware=args.hardware)
                for out in run_folders(args.out, load, args.repeat)]
        cells = []
        for m in COLUMNS:
            errors = [(got[m][1] / got[m][0] - 1) * 100 for got in runs]
            cell = f"{statistics.median(errors):+.1f} %"
            cells.append(cell if len(runs) == 1 else
                         f"{cell} [{min(errors):+.1f}, {max(errors):+.1f}]")
        print(f"| {load} | {' | '.join(cells)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
