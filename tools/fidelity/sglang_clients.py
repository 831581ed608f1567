"""Do SGLang's own client and Revati's read an emulated SGLang server alike? Prints both.

The same load through `python -m sglang.bench_serving` and through Revati's client (vLLM's
`bench serve`, what `revati bench` runs) against one emulated SGLang server: N requests of
128 prompt tokens and 64 output tokens, ignore_eos, one at a time (bench_serving draws
Poisson arrivals only, from its own random stream, so both run closed-loop), sampled alike
(temperature 1.0, top_p 1.0: Revati's client sends no temperature, SGLang's default).

The clients define the metrics alike, except that bench_serving's latency runs to the
stream's [DONE] event and vLLM's to the last chunk with text (~0.5 ms later per request).
With one request in flight the output throughput is output tokens per request latency, so
the throughputs should differ by what the mean latencies differ: the last line prints that
residual. On a 2-core host most of a TTFT is the host's CPU work, which counts on the
virtual clock, so run it on a quiet host and several times (docs/validation.md, SGLang).

    .venv/bin/python tools/fidelity/sglang_clients.py [--runs 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from revati.bench.options import BenchOptions
from revati.bench.server import EmulatedServer
from revati.engines import sglang

MODEL = "llama3_8b"  # the emulated server's, named once for the server and its loads
KEYS = ("output_throughput", "mean_tpot_ms", "median_tpot_ms", "median_ttft_ms",
        "mean_ttft_ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="pairs of client runs (default 3)")
    ap.add_argument("--num-prompts", type=int, default=32)
    ap.add_argument("--out", type=Path, default=None, help="where the runs' files go")
    a = ap.parse_args()
    out = a.out or Path(tempfile.mkdtemp(prefix="sglang-clients-"))
    opts = BenchOptions(model=MODEL, hardware="h200", engine="sglang", out=out / "srv",
                        engine_args=["--context-length", "4096"], ready_timeout_s=1200)
    with EmulatedServer(opts) as srv:
        for run in range(a.runs):
            d = out / f"run{run}"
            d.mkdir(parents=True, exist_ok=True)
            result = d / "sglang_bench.jsonl"
            srv.run_client(sglang.bench_serving_command(
                srv.python, srv.port, srv.folder.model_dir, srv.folder.tokenizer_dir, result,
                a.num_prompts, 128, 64, run, ["--extra-request-body", '{"temperature": 1.0}']),
                d / "sglang_client.log", 900, {"HF_HUB_OFFLINE": "1"})
            sgl = json.loads(result.read_text().splitlines()[-1])
            rev = srv.run_load(BenchOptions(
                model=MODEL, hardware="h200", engine="sglang", out=d / "revati",
                input_len=128, output_len=64, num_prompts=a.num_prompts,
                request_rate=float("inf"), max_concurrency=1, seed=run), d / "revati")
            print(f"run {run}: metric  bench_serving  revati  ratio-1")
            for k in KEYS:
                print(f"  {k:18s} {sgl[k]:12.2f} {rev[k]:9.2f} {sgl[k] / rev[k] - 1:+8.1%}")
            latency = sgl["mean_e2e_latency_ms"] / rev["mean_e2el_ms"]
            residual = sgl["output_throughput"] / rev["output_throughput"] * latency - 1
            print(f"  throughput ratio not explained by the mean latencies: {residual:+.2%}")
    print(f"files in {out}")


if __name__ == "__main__":
    main()
