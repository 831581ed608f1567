"""Early stopping: a trial reports its objective at steps of its load, and the sweep's Optuna
pruner stops the trials that cannot win (docs/tune.md, "Stopping losing trials early").

The steps are tenths of the load's measured requests completed, in virtual time. The value
at a step is the objective over the requests so far, read from the engine's own Prometheus
counters and histograms (vLLM's /metrics) as differences from the measured start: the
client's figures (summary.json) exist only once its whole load is done. A latency quantile
comes from the histogram's buckets, and goodput from the shares under each SLO as if TTFT and
TPOT were independent: an estimate, the same for every trial, which is all a pruner compares
(the median pruner takes the median of the other trials' values at the same step). A trial
ends with the client's exact value. SGLang serves these metrics only with --enable-metrics,
which a sweep with a pruner adds to its command line (the engine's `metrics_args`); it has no
TPOT histogram, so an SGLang trial whose objective needs TPOT (its mean or quantiles,
goodput) reports nothing and is never stopped early.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import optuna

from revati.engines.common import http_get
from revati.tune.errors import ConfigError

STEPS = 10  # reports per load: at each tenth of its measured requests completed

PRUNERS: dict[str, Callable[..., optuna.pruners.BasePruner]] = {
    "median": optuna.pruners.MedianPruner,
    "percentile": optuna.pruners.PercentilePruner,
    "successive_halving": optuna.pruners.SuccessiveHalvingPruner,
    "hyperband": lambda **kw: optuna.pruners.HyperbandPruner(
        **{"min_resource": 1, "max_resource": STEPS, **kw}),
}

_SAMPLE = re.compile(r"^((?:vllm|sglang):[a-z0-9_]+?)(?:_total)?(?:\{([^}]*)\})? (\S+)$", re.M)
_LE = re.compile(r'le="([^"]+)"')
_LATENCY = re.compile(r"(mean|median|p(\d+(?:\.\d+)?))_(ttft|tpot|itl|e2el)_ms")
_RATES = ("output_throughput", "total_token_throughput", "request_throughput")


@dataclass(frozen=True)
class Names:
    """An engine's Prometheus names for what the estimates read."""
    histograms: dict[str, str]  # summary latency (ttft, tpot, ...) -> its histogram
    generated: str              # output tokens
    prompt: str                 # input tokens
    finished: str               # requests completed

    def rate(self, metric: str) -> tuple[str, ...]:
        return {"output_throughput": (self.generated,),
                "total_token_throughput": (self.generated, self.prompt),
                "request_throughput": (self.finished,)}[metric]


NAMES = {
    "vllm": Names({"ttft": "vllm:time_to_first_token_seconds",
                   "tpot": "vllm:request_time_per_output_token_seconds",
                   "itl": "vllm:inter_token_latency_seconds",
                   "e2el": "vllm:e2e_request_latency_seconds"},
                  "vllm:generation_tokens", "vllm:prompt_tokens", "vllm:request_success"),
    # SGLang 0.5.17's observability/metrics_collector.py; num_requests counts a request
    # when it finishes
    "sglang": Names({"ttft": "sglang:time_to_first_token_seconds",
                     "itl": "sglang:inter_token_latency_seconds",
                     "e2el": "sglang:e2e_request_latency_seconds"},
                    "sglang:generation_tokens", "sglang:prompt_tokens",
                    "sglang:num_requests"),
}


def reportable(metric: str) -> bool:
    """Whether a trial can report `metric` during its load."""
    base = metric.removesuffix("_per_gpu")
    return (bool(_LATENCY.fullmatch(metric)) or base in _RATES or base == "goodput"
            or metric == "cost_per_million_tokens")


def metrics_args(cfg: Any) -> list[str]:
    """The engine flags that make it serve the metrics the pruner reads: none without one."""
    if cfg.sweep.get("pruner") is None:
        return []
    return [str(a) for a in cfg.engine.metrics_args]


def make_pruner(sweep: Any) -> optuna.pruners.BasePruner:
    """The sweep's `pruner` ({kind: median, ...Optuna's arguments}), NopPruner without one;
    ConfigError when it cannot work for this sweep."""
    spec = sweep.get("pruner")
    if spec is None:
        return optuna.pruners.NopPruner()
    args = {k: v for k, v in dict(spec).items() if k != "kind"}
    kind = spec.get("kind")
    if kind not in PRUNERS:
        raise ConfigError(f"unknown sweep.pruner.kind {kind!r} (known: {', '.join(PRUNERS)})")
    if len(sweep.objectives) != 1:
        raise ConfigError("sweep.pruner needs one objective: Optuna prunes single-objective "
                          f"studies only, and this sweep has {len(sweep.objectives)}")
    metric = sweep.objectives[0].metric
    if not reportable(metric):
        raise ConfigError(f"sweep.pruner: objective '{metric}' cannot be read during a load "
                          "(means, quantiles and rates of TTFT, TPOT, ITL and E2E latency, "
                          "throughputs, goodput and cost can)")
    try:
        return PRUNERS[kind](**args)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"sweep.pruner: {e}") from None


@dataclass
class Sample:
    """The engine's counters and histograms at one moment, in virtual time."""
    virtual_s: float
    counters: dict[str, float] = field(default_factory=dict)
    buckets: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str, virtual_s: float) -> Sample:
        s = cls(virtual_s)
        for name, labels, value in _SAMPLE.findall(text):
            v = float(value)
            if name.endswith("_bucket"):
                le = _LE.search(labels or "")
                if le:
                    bounds = s.buckets.setdefault(name.removesuffix("_bucket"), [])
                    bounds.append((float(le.group(1)), v))
            else:  # summed over label sets (models, engine indices)
                s.counters[name] = s.counters.get(name, 0.0) + v
        for name, pairs in s.buckets.items():  # several label sets: sum by bound
            summed: dict[float, float] = {}
            for le, v in pairs:
                summed[le] = summed.get(le, 0.0) + v
            s.buckets[name] = sorted(summed.items())
        return s

    def since(self, base: Sample) -> Sample:
        d = Sample(self.virtual_s - base.virtual_s)
        d.counters = {k: v - base.counters.get(k, 0.0) for k, v in self.counters.items()}
        for name, pairs in self.buckets.items():
            before = dict(base.buckets.get(name, []))
            d.buckets[name] = [(le, v - before.get(le, 0.0)) for le, v in pairs]
        return d


def _quantile(buckets: list[tuple[float, float]], q: float) -> float | None:
    """The q-quantile of a cumulative histogram, linear within the bucket that holds it."""
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0:
        return None
    rank, lo, below = q * total, 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if math.isinf(le) or count == below:
                return lo
            return lo + (le - lo) * (rank - below) / (count - below)
        lo, below = le, count
    return lo


def _share_under(buckets: list[tuple[float, float]], bound_s: float) -> float | None:
    """The share of observations at most bound_s, linear within its bucket."""
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0:
        return None
    lo, below = 0.0, 0.0
    for le, count in buckets:
        if bound_s <= le:
            if math.isinf(le):
                return below / total
            return (below + (count - below) * (bound_s - lo) / (le - lo)) / total
        lo, below = le, count
    return 1.0


def estimate(metric: str, d: Sample, names: Names, gpus: int, slo: Any,
             price_per_gpu_hour: float) -> float | None:
    """`metric` over the requests of d (a Sample since the measured start), read by the
    engine's names; None when they do not yet tell it or the engine does not serve it."""
    if d.virtual_s <= 0:
        return None
    base, per_gpu = metric.removesuffix("_per_gpu"), metric.endswith("_per_gpu")
    value: float | None
    if m := _LATENCY.fullmatch(metric):
        hist = names.histograms.get(m.group(3))
        if hist is None:
            return None
        if m.group(1) == "mean":
            count = d.counters.get(hist + "_count", 0.0)
            value = d.counters.get(hist + "_sum", 0.0) / count if count > 0 else None
        else:
            q = 0.5 if m.group(1) == "median" else float(m.group(2)) / 100
            value = _quantile(d.buckets.get(hist, []), q)
        return None if value is None else value * 1e3
    if base in _RATES:
        value = sum(d.counters.get(c, 0.0) for c in names.rate(base)) / d.virtual_s
    elif base == "goodput":
        if "tpot" not in names.histograms:
            return None
        ttft = _share_under(d.buckets.get(names.histograms["ttft"], []), slo.ttft_ms / 1e3)
        tpot = _share_under(d.buckets.get(names.histograms["tpot"], []), slo.tpot_ms / 1e3)
        if ttft is None or tpot is None:
            return None
        value = d.counters.get(names.finished, 0.0) / d.virtual_s * ttft * tpot
    else:  # cost_per_million_tokens
        tokens = sum(d.counters.get(c, 0.0) for c in names.rate("total_token_throughput"))
        if tokens <= 0:
            return None
        return gpus * price_per_gpu_hour / 3600 / (tokens / d.virtual_s) * 1e6
    return value / gpus if per_gpu else value


class LoadReports:
    """during_measured for a trial's load (EmulatedServer.run_load): at each tenth of the
    measured requests completed, report the objective to Optuna and raise TrialPruned when
    the pruner says the trial cannot win."""

    def __init__(self, trial: optuna.Trial, cfg: Any, port: int,
                 virtual_s: Callable[[], float]) -> None:
        self.trial, self.port, self.virtual_s = trial, port, virtual_s
        self.metric = cfg.sweep.objectives[0].metric
        self.names = NAMES[cfg.engine.name]
        par = cfg.parallelism
        self.gpus = par.tensor_parallel_size * par.pipeline_parallel_size
        self.slo, self.price = cfg.workload.slo, cfg.hardware.price_per_gpu_hour_usd
        self.requests = cfg.workload.num_prompts or 0  # a whole trace: not known here
        self.base: Sample | None = None
        self.step = 0

    def sample(self) -> Sample | None:
        body = http_get(self.port, "/metrics")
        return None if body is None else Sample.parse(body.decode(errors="replace"),
                                                      self.virtual_s())

    def __call__(self) -> None:
        now = self.sample() if self.requests else None
        if now is None:
            return
        if self.base is None:
            self.base = now
            return
        d = now.since(self.base)
        step = int(d.counters.get(self.names.finished, 0.0) * STEPS // max(1, self.requests))
        if not self.step < step < STEPS:  # the last step is the trial's own result
            return
        value = estimate(self.metric, d, self.names, self.gpus, self.slo, self.price)
        if value is None or not math.isfinite(value):
            return
        self.step = step
        self.trial.report(value, step)
        if self.trial.should_prune():
            raise optuna.TrialPruned(
                f"stopped at {step}/{STEPS} of its requests: {self.metric} {value:.4g} so far "
                f"(virtual {d.virtual_s:.1f} s)")
