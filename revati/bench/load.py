"""The load: what `vllm bench serve`, the load generator of every engine, is asked to send."""

from __future__ import annotations

from pathlib import Path

from revati.bench.errors import BenchError
from revati.bench.options import BenchOptions
from revati.workload import datasets

# what `vllm bench serve` prints once its warm-ups are done, before the measured requests
MEASURED_RUN = "Starting main benchmark run"


def load_args(opts: BenchOptions, out: Path, max_len: int | None) -> dict[str, str | None]:
    """`vllm bench serve` arguments (name: value, None for a bare flag) for the workload;
    sharegpt and trace requests go to OUT/dataset.jsonl as vLLM's timed_trace dataset.
    ShareGPT draws only pairs that fit the engine's max_len."""
    common = {"num-prompts": str(opts.num_prompts), "seed": str(opts.seed),
              "num-warmups": str(opts.num_warmups)}
    if opts.max_concurrency:
        common["max-concurrency"] = str(opts.max_concurrency)
    arrivals = {"request-rate": str(opts.request_rate), "burstiness": str(opts.burstiness)}
    if opts.dataset == "random":
        return {"dataset-name": "random", "random-input-len": str(opts.input_len),
                "random-output-len": str(opts.output_len),
                "random-range-ratio": str(opts.range_ratio), **arrivals, **common}
    try:
        if opts.dataset == "sharegpt":
            requests = datasets.sharegpt(opts.num_prompts, opts.seed, max_len)
            timing = {"no-self-timed": None, **arrivals}
        else:   # a trace, which check_requests has read once already
            assert opts.trace is not None
            requests = datasets.load_trace(opts.trace)[:opts.num_prompts or None]
            common["num-prompts"] = str(len(requests))
            timing = {"self-timed": None}
        path = datasets.write_timed_trace(requests, out / "dataset.jsonl")
    except datasets.DatasetError as e:
        raise BenchError(str(e)) from e
    return {"dataset-name": "timed_trace", "dataset-path": str(path), **timing, **common}
