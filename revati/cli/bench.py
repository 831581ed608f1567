"""`revati bench`: run an emulated deployment under load and write its metrics."""

from __future__ import annotations

import argparse
import sys

from revati.bench.errors import BenchError
from revati.bench.options import add_arguments, from_args
from revati.bench.server import run_bench
from revati.timewarp.priority import NICE


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench", help="benchmark an emulated serving engine (vLLM or SGLang) with `vllm bench "
        "serve`",
        description="Start a Timekeeper, the emulated engine and the load generator; write "
        "OUT/summary.json and OUT/requests.csv. Arguments after -- go to the engine.")
    add_arguments(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    opts = from_args(args)
    try:
        s = run_bench(opts)
    except BenchError as e:
        print(f"revati bench: {e}", file=sys.stderr)
        return 1
    if s.get("failed") or not s["completed"]:
        why = "; ".join(f"{n} x {e}" for e, n in s["failure_reasons"].items()) or "no error given"
        print(f"revati bench: {s.get('failed', 0)} of {s['completed'] + s.get('failed', 0)} "
              f"requests failed ({why}); see {args.out}/engine.log", file=sys.stderr)
        return 1
    print(f"[revati bench] done: {s['completed']} requests, mean TTFT {s['mean_ttft_ms']:.1f} ms,"
          f" mean TPOT {s['mean_tpot_ms']:.2f} ms, output {s['output_throughput']:.1f} tok/s, "
          f"virtual duration {s['duration']:.1f} s, wall {s['wall_s']:.1f} s "
          f"(measured requests {s['measured_wall_s'] or 0:.1f} s); "
          f"written to {args.out}/summary.json")
    r = s["revati"]["virtual_clock"]
    if r["rate_mean"] is not None:
        print(f"[revati bench] CPU work was {r['cpu_bound_share']:.0%} of the virtual time; "
              f"virtual time ran at x{r['rate_min']:.2f}-{r['rate_max']:.2f} of real time "
              f"meanwhile (mean x{r['rate_mean']:.2f})")
    c = s["revati"]["cpu_contention"]
    if c["host_mean"]:
        print(f"[revati bench] CPU work counted at the GPU node's speed: x{c['host_min']:.2f}-"
              f"{c['host_max']:.2f} of this host's (mean x{c['host_mean']:.2f}, time stolen by "
              f"the hypervisor {c['steal_mean']:.1%})")
    if c["contended_s"]:
        print(f"[revati bench] CPU contention on {s['revati']['cores']} cores: "
              f"{c['contended_s']:.1f} of {c['sampled_s']:.1f} real seconds counted as "
              f"{c['virtual_s']:.1f} virtual seconds (mean {c['mean_runnable']:.2f} runnable "
              "threads)")
    nice = s["revati"]["nice"]
    print(f"[revati bench] the deployment ran at nice {nice}, " + (
        "ahead of this host's other programs" if nice < 0 else
        f"beside this host's other programs (nice {NICE} needs root or CAP_SYS_NICE; "
        "docs/timewarp.md, \"Priority\")"))
    return 0
