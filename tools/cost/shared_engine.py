"""Does a shared engine give a fresh engine's answer, and what does it save? (issue #28, item 1)

Runs --rounds rounds, each a fresh emulated engine for one load (`revati bench`), then one
engine for two loads (EmulatedServer.run_load, as the tuner's shared trials and `revati
compare` do: prefix cache emptied between loads). Interleaved, so that a host that speeds up
or slows down during the runs moves both sides alike. Prints per metric the fresh runs'
median [range], each second load (the shared trial), whether every one lies within the
fresh range, and the second load over the first on the same engine (a paired ratio: same
engine, same minutes of the host); then the wall time per trial each way and the trials per
hour it gives.

    PYTHONPATH=. .venv/bin/python tools/cost/shared_engine.py --out OUT [--rounds 3]

Runs are kept in OUT/fresh<i> and OUT/shared<i>/run<j>; run it on a quiet host.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from revati.bench.options import add_arguments, from_args
from revati.bench.server import EmulatedServer

LOAD = ["--model", "llama3_8b", "--hardware", "h200", "--input-len", "512", "--output-len",
        "128", "--num-prompts", "50", "--request-rate", "8", "--num-warmups", "16", "--seed", "0"]
ENGINE = ["--max-model-len", "4096"]
METRICS = ("mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "p99_itl_ms",
           "output_throughput")


def fresh(out: Path) -> tuple[dict, float]:
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "revati.cli.main", "bench", *LOAD, "--out",
                        str(out), "--", *ENGINE], stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"fresh run failed: see {out}/engine.log")
    return json.loads((out / "summary.json").read_text()), wall


def shared(out: Path) -> tuple[list[dict], float]:
    """Two loads on one engine; the wall time of the second, which is all a shared trial
    costs."""
    # the same options as the fresh runs' command line, read by `revati bench`'s own parser
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    opts = from_args(parser.parse_args([*LOAD, "--out", str(out), "--", *ENGINE]))
    with EmulatedServer(opts) as server:
        first = server.run_load(opts, opts.out / "run0")
        t0 = time.monotonic()
        second = server.run_load(opts, opts.out / "run1")
        wall = time.monotonic() - t0
    return [first, second], wall


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    f_runs, f_wall, pairs, s_wall = [], [], [], []
    for i in range(args.rounds):
        run, wall = fresh(args.out / f"fresh{i}")
        f_runs.append(run)
        f_wall.append(wall)
        both, wall = shared(args.out / f"shared{i}")
        pairs.append(both)
        s_wall.append(wall)
        print(f"round {i + 1}/{args.rounds} done", file=sys.stderr)
    print("| metric | fresh median [min-max] | shared (second load) | within fresh range "
          "| second / first load, same engine |")
    print("|---|---:|---:|---|---:|")
    for m in METRICS:
        fv, sv = [r[m] for r in f_runs], [b[m] for _, b in pairs]
        lo, hi = min(fv), max(fv)
        ratios = ", ".join(f"{b[m] / a[m]:.3f}" for a, b in pairs)
        print(f"| {m} | {statistics.median(fv):.2f} [{lo:.2f}-{hi:.2f}] | "
              f"{', '.join(f'{v:.2f}' for v in sv)} | "
              f"{'yes' if all(lo <= v <= hi for v in sv) else 'no'} | {ratios} |")
    fw, sw = statistics.median(f_wall), statistics.median(s_wall)
    print(f"\nwall time per trial (median of {args.rounds}): fresh {fw:.0f} s "
          f"[{min(f_wall):.0f}-{max(f_wall):.0f}] ({3600 / fw:.0f} trials/h), shared "
          f"{sw:.0f} s [{min(s_wall):.0f}-{max(s_wall):.0f}] ({3600 / sw:.0f} trials/h): "
          f"x{fw / sw:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
