"""Trial metrics: the benchmark summary plus figures derived from it and the config.

Derived metrics:
- num_gpus: tensor x pipeline parallel size.
- goodput, goodput_per_gpu: requests/s (per GPU) that met both SLOs of the workload
  (TTFT <= slo.ttft_ms and TPOT <= slo.tpot_ms), from requests.csv (columns ttft_ms,
  tpot_ms; one row per successful request).
- output_throughput_per_gpu: output tokens/s per GPU.
- cost_per_million_tokens: GPU cost (hardware price_per_gpu_hour_usd x num_gpus) of
  serving one million tokens (input + output) at the measured total_token_throughput.
- host_cpu_ms: this host's single-thread CPU speed (revati.hostspeed, ms per repetition),
  the slower of its measurements before and after the load (the clock rate corrects CPU
  work to the GPU node's speed; a trial run on a much slower host leaned on that more).
- cpu_dilation: how many times the clock rate's time the engine's GPU-driving threads
  counted for their CPU (PyTorch's dispatch against the rate's speed; docs/timewarp.md).
- runnable_per_core: the deployment's threads that wanted a CPU, on average, per core the
  clock rate corrected for (revati.cpu_contention.mean_runnable / revati.cores). Above 1 the
  engine's processes took turns on this host's cores where the node runs them side by side,
  and the rate counts CPU-bound steps long (docs/limits.md, "With more busy engine processes
  than cores").
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from revati.tune.trial import TrialError

DERIVED = ("num_gpus", "goodput", "goodput_per_gpu", "output_throughput_per_gpu",
           "cost_per_million_tokens", "host_cpu_ms", "cpu_dilation", "runnable_per_core")
# Scalar keys of `vllm bench serve --save-result` plus those revati bench adds.
SUMMARY = ("duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
           "request_throughput", "request_goodput", "output_throughput", "total_token_throughput",
           "max_concurrency", "wall_s", "measured_wall_s", "num_gpu_blocks",
           "predictor_coverage")
_LATENCY = re.compile(r"(mean|median|std|p\d+(\.\d+)?)_(ttft|tpot|itl|e2el)_ms")


def is_known_metric(name: str) -> bool:
    return name in DERIVED or name in SUMMARY or bool(_LATENCY.fullmatch(name))


def read_requests(out_dir: Path) -> pd.DataFrame | None:
    """OUT/requests.csv, or None when the benchmark wrote none."""
    path = out_dir / "requests.csv"
    if not path.is_file():
        return None
    try:
        return pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise TrialError(f"bench wrote an unreadable {path.name}: {exc}") from None


def _goodput(cfg: Any, summary: dict[str, Any], requests: pd.DataFrame | None) -> float | None:
    if requests is None or not summary.get("duration"):
        return None
    if not {"ttft_ms", "tpot_ms"} <= set(requests.columns):
        raise TrialError("requests.csv lacks the ttft_ms/tpot_ms columns goodput needs")
    slo = cfg.workload.slo
    ok = (requests["ttft_ms"] <= slo.ttft_ms) & (requests["tpot_ms"] <= slo.tpot_ms)
    return float(ok.sum()) / summary["duration"]


def trial_metrics(cfg: Any, summary: dict[str, Any],
                  requests: pd.DataFrame | None) -> dict[str, float]:
    """Every numeric summary value plus the derived metrics that its inputs allow."""
    metrics = {k: float(v) for k, v in summary.items()
               if isinstance(v, int | float) and not isinstance(v, bool)}
    gpus = cfg.parallelism.tensor_parallel_size * cfg.parallelism.pipeline_parallel_size
    metrics["num_gpus"] = float(gpus)
    goodput = _goodput(cfg, summary, requests)
    if goodput is not None:
        metrics["goodput"] = goodput
        metrics["goodput_per_gpu"] = goodput / gpus
    if "output_throughput" in metrics:
        metrics["output_throughput_per_gpu"] = metrics["output_throughput"] / gpus
    if metrics.get("total_token_throughput"):
        dollars_per_s = gpus * cfg.hardware.price_per_gpu_hour_usd / 3600
        metrics["cost_per_million_tokens"] = dollars_per_s / metrics["total_token_throughput"] * 1e6
    host = summary.get("revati", {}).get("host_cpu_ms", {})
    if host.get("before") and host.get("after"):
        metrics["host_cpu_ms"] = max(host["before"], host["after"])
    dilation = summary.get("revati", {}).get("cpu_dilation", {}).get("factor")
    if dilation:
        metrics["cpu_dilation"] = dilation
    cores = summary.get("revati", {}).get("cores")
    runnable = (summary.get("revati", {}).get("cpu_contention") or {}).get("mean_runnable")
    if cores and runnable is not None:
        metrics["runnable_per_core"] = runnable / cores
    return metrics


def combine_repeats(runs: list[dict[str, float]], spread: Iterable[str]) -> dict[str, float]:
    """A configuration's metrics over its repeated loads (trial.repeats, docs/tune.md,
    "Repeated loads"): the median of each metric every load has, and for the `spread` metrics
    (the objectives and the report's key metrics) the lowest and highest as NAME_min and
    NAME_max, so that a ranking shows which of its differences lie within the run-to-run
    spread."""
    if len(runs) == 1:
        return runs[0]
    keys = [k for k in runs[0] if all(k in r for r in runs[1:])]
    out = {k: float(statistics.median(r[k] for r in runs)) for k in keys}
    for k in dict.fromkeys(spread):
        if k in out:
            out[f"{k}_min"] = min(r[k] for r in runs)
            out[f"{k}_max"] = max(r[k] for r in runs)
    out["repeats"] = float(len(runs))
    return out


def objective_values(metrics: dict[str, float], objectives: Any) -> list[float]:
    values = []
    for obj in objectives:
        value = metrics.get(obj.metric)
        if value is None or not math.isfinite(value):
            raise TrialError(f"the benchmark result has no finite '{obj.metric}' "
                             f"(an objective of this sweep)")
        values.append(value)
    return values
