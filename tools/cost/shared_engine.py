"""Does a shared engine give a fresh engine's answer, and what does it save? (issue #28, item 1)

Runs one load --repeat times on a fresh emulated engine each (`revati bench`), then --repeat
times on one engine (EmulatedServer.run_load, as the tuner's shared trials and `revati
compare` do: prefix cache emptied between loads), and prints per metric the fresh runs'
median [range], each shared run, and whether every shared run lies within the fresh range;
then the wall time of each way and the trials per hour it gives.

    PYTHONPATH=. .venv/bin/python tools/cost/shared_engine.py --out OUT [--repeat 3]
        [-- revati bench options, default: the small load below]

Runs are kept in OUT/fresh<i> and OUT/shared/run<i>; run it on a quiet host.
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


def fresh(out: Path, repeat: int) -> tuple[list[dict], float]:
    runs, wall = [], 0.0
    for i in range(repeat):
        d = out / f"fresh{i}"
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "revati.cli.main", "bench", *LOAD,
                            "--out", str(d), "--", *ENGINE], stdout=subprocess.DEVNULL)
        wall += time.monotonic() - t0
        if r.returncode != 0:
            raise SystemExit(f"fresh run {i} failed: see {d}/engine.log")
        runs.append(json.loads((d / "summary.json").read_text()))
    return runs, wall


def shared(out: Path, repeat: int) -> tuple[list[dict], float]:
    # the same options as the fresh runs' command line, read by `revati bench`'s own parser
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    opts = from_args(parser.parse_args([*LOAD, "--out", str(out / "shared"), "--", *ENGINE]))
    t0 = time.monotonic()
    with EmulatedServer(opts) as server:
        runs = [server.run_load(opts, opts.out / f"run{i}") for i in range(repeat)]
    return runs, time.monotonic() - t0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    f_runs, f_wall = fresh(args.out, args.repeat)
    s_runs, s_wall = shared(args.out, args.repeat)
    print("| metric | fresh median [min-max] | shared runs | shared within fresh range |")
    print("|---|---:|---:|---|")
    for m in METRICS:
        fv, sv = [r[m] for r in f_runs], [r[m] for r in s_runs]
        lo, hi = min(fv), max(fv)
        print(f"| {m} | {statistics.median(fv):.2f} [{lo:.2f}-{hi:.2f}] | "
              f"{', '.join(f'{v:.2f}' for v in sv)} | "
              f"{'yes' if all(lo <= v <= hi for v in sv) else 'no'} |")
    n = args.repeat
    print(f"\nwall time for {n} trials: fresh {f_wall:.0f} s ({3600 * n / f_wall:.0f} trials/h), "
          f"shared {s_wall:.0f} s ({3600 * n / s_wall:.0f} trials/h): x{f_wall / s_wall:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
