"""`revati bench`: run an emulated deployment under load and write its metrics."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from revati.engines import ENGINES
from revati.timewarp.timekeeper import parse_cores
from revati.workload.bench import BenchError, BenchOptions, run_bench
from revati.workload.datasets import DATASETS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench", help="benchmark an emulated serving engine (vLLM or SGLang) with `vllm bench "
        "serve`",
        description="Start a Timekeeper, the emulated engine and the load generator; write "
        "OUT/summary.json and OUT/requests.csv. Arguments after -- go to the engine.")
    p.add_argument("--engine", default="vllm", choices=sorted(ENGINES),
                   help="serving engine (its interpreter: .venv-ENGINE, see --engine-python)")
    p.add_argument("--model", required=True, help="catalog name (conf/model), e.g. llama3_8b")
    p.add_argument("--hardware", required=True, help="conf/hardware name or prefix, e.g. h200")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--pp", type=int, default=1)
    p.add_argument("--dataset", default="random", choices=DATASETS,
                   help="random: --input-len/--output-len tokens; sharegpt: lengths drawn "
                   "from the shipped ShareGPT distribution; trace: replay --trace")
    p.add_argument("--trace", type=Path, metavar="FILE",
                   help="CSV or JSONL of timestamp (s), input_length, output_length per "
                   "request, replayed at its own arrival times (--dataset trace)")
    p.add_argument("--input-len", type=int, default=1024)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--range-ratio", type=float, default=0.0,
                   help="random lengths in [len*(1-r), len*(1+r)]")
    p.add_argument("--num-prompts", type=int,
                   help="requests to send (default: 200; a trace's every request)")
    p.add_argument("--request-rate", type=float, default=float("inf"),
                   help="requests per virtual second (inf: all at once)")
    p.add_argument("--burstiness", type=float, default=1.0,
                   help="gamma shape of the inter-arrival times (1: Poisson, inf: fixed rate)")
    p.add_argument("--max-concurrency", type=int)
    p.add_argument("--num-warmups", type=int, default=0,
                   help="unmeasured requests sent at once before the load, to warm the "
                   "engine up (16 reaches the batch sizes whose kernels compile on first use)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--port", type=int, help="engine port (default: a free one)")
    p.add_argument("--ready-timeout", type=float, default=1800.0, metavar="SECONDS")
    p.add_argument("--engine-python", type=Path, help="interpreter that has the engine")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--log-level", choices=["error", "warn", "info", "debug"], default="warn")
    p.add_argument("--cores", type=parse_cores, metavar="N|auto|off",
                   help="CPU-contention correction as for `revati run --cores` (default: "
                   "auto, this host's cores)")
    add_cpu_dilation(p)
    p.add_argument("--gpu-trace", action="store_true",
                   help="write OUT/gpu_trace.json, a Chrome trace (chrome://tracing, Perfetto) "
                   "of every emulated kernel, copy and collective on its stream and of the "
                   "clock's jumps, in virtual time: ~150 bytes a kernel, so keep the load short")
    p.add_argument("engine_args", nargs=argparse.REMAINDER, metavar="-- ENGINE FLAGS")
    p.set_defaults(func=main)


def parse_dilation(value: str) -> float | None:
    """A --cpu-dilation argument: `auto` (None: measured), `off` (1) or a factor >= 1."""
    if value == "auto":
        return None
    if value == "off":
        return 1.0
    try:
        f = float(value)
    except ValueError:
        f = 0.0
    if not 1.0 <= f <= 100.0:
        raise argparse.ArgumentTypeError(f"expected auto, off or a factor from 1 to 100, not "
                                         f"{value!r}")
    return f


def add_cpu_dilation(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cpu-dilation", type=parse_dilation, default=None,
                   metavar="auto|off|F",
                   help="GPU-driving threads pay F times their CPU time, for a GPU node whose "
                   "host is slower than this one (default auto: the node's PyTorch dispatch "
                   "time over this host's, from conf/hardware; docs/timewarp.md)")


def main(args: argparse.Namespace) -> int:
    extra = args.engine_args[1:] if args.engine_args[:1] == ["--"] else args.engine_args
    opts = BenchOptions(
        engine=args.engine, model=args.model, hardware=args.hardware, tp=args.tp, pp=args.pp,
        dataset=args.dataset, trace=args.trace, input_len=args.input_len,
        output_len=args.output_len, range_ratio=args.range_ratio,
        num_prompts=(args.num_prompts if args.num_prompts is not None
                     else None if args.dataset == "trace" else 200),
        request_rate=args.request_rate, burstiness=args.burstiness,
        max_concurrency=args.max_concurrency, num_warmups=args.num_warmups, seed=args.seed,
        port=args.port,
        ready_timeout_s=args.ready_timeout, engine_python=args.engine_python, out=args.out,
        engine_args=extra, log_level=args.log_level, cores=args.cores,
        cpu_dilation=args.cpu_dilation, gpu_trace=args.gpu_trace)
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
    c = s["revati"]["cpu_contention"]
    if c["contended_s"]:
        print(f"[revati bench] CPU contention on {s['revati']['cores']} cores: "
              f"{c['contended_s']:.1f} of {c['sampled_s']:.1f} real seconds counted as "
              f"{c['virtual_s']:.1f} virtual seconds (mean {c['mean_runnable']:.2f} runnable "
              "threads)")
    return 0
