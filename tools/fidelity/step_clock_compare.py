"""Compare engine steps of two runs, as tools/fidelity/vllm_step_clock/ recorded them (a real GPU
run and an emulated one), by the kind of step: decode-only steps and steps that carry
prefill tokens, binned by those tokens. Prints the median of each time column per kind.

    python tools/fidelity/step_clock_compare.py REAL.tsv[@FROM_MS-TO_MS] EMULATED.tsv[@FROM-TO] ...

`@FROM_MS-TO_MS` keeps the steps whose wall-clock start (ms since the epoch) lies in that
window, e.g. one benchmark of a server that ran several.
"""

from __future__ import annotations

import statistics
import sys

COLUMNS = ("step", "t_ms", "tokens", "reqs", "prefill_tokens", "prefill_rows", "new_reqs",
           "cpu_exec_ms", "thread_cpu_ms", "cpu_sample_ms", "gpu_ms")
# (label, lowest, highest prefill tokens of a step)
KINDS = (("decode only", 0, 0), ("prefill 1-511", 1, 511), ("prefill 512", 512, 512),
         ("prefill 513-1023", 513, 1023), ("prefill 1024-2047", 1024, 2047),
         ("prefill >= 2048", 2048, 1 << 40))
SHOWN = ("gpu_ms", "cpu_exec_ms", "thread_cpu_ms", "cpu_sample_ms", "tokens")


def read_steps(arg: str) -> list[dict[str, float]]:
    path, _, window = arg.partition("@")
    lo, hi = (float(x) for x in window.split("-")) if window else (0.0, float("inf"))
    rows = []
    for line in open(path):
        cells = line.rstrip("\n").split("\t")
        if len(cells) == len(COLUMNS) - 1:  # written before thread_cpu_ms was recorded
            cells.insert(COLUMNS.index("thread_cpu_ms"), "nan")
        if len(cells) != len(COLUMNS):
            continue
        row = dict(zip(COLUMNS, map(float, cells), strict=True))
        if lo <= row["t_ms"] <= hi:
            rows.append(row)
    return rows


def summary(rows: list[dict[str, float]]) -> dict[str, tuple[int, dict[str, float]]]:
    out = {}
    for label, lo, hi in KINDS:
        sel = [r for r in rows if lo <= r["prefill_tokens"] <= hi]
        if sel:
            out[label] = (len(sel), {c: statistics.median(r[c] for r in sel) for c in SHOWN})
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    runs = [(arg.rsplit("/", 1)[-1], summary(read_steps(arg))) for arg in argv]
    print("kind | run | steps | " + " | ".join(f"median {c}" for c in SHOWN))
    for label, _, _ in KINDS:
        for name, s in runs:
            if label in s:
                n, med = s[label]
                print(f"{label} | {name} | {n} | " + " | ".join(f"{med[c]:.2f}" for c in SHOWN))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
