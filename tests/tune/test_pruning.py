"""Early stopping (issue #28, item 2): the sweep file's pruner, the objective read from the
engine's Prometheus metrics at steps of a load, and the report of a trial stopped early (the
whole route with a real engine: test_tune_e2e.py)."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path

import optuna
import pytest
from omegaconf import OmegaConf

from revati.tune.errors import ConfigError
from revati.tune.pruning import (
    NAMES,
    STEPS,
    LoadReports,
    Sample,
    estimate,
    make_pruner,
    reportable,
)
from revati.tune.trial import bench_options

BUCKETS = (0.01, 0.1, 1.0)


def _metrics(done: int, ttfts: list[float], tpots: list[float], tokens: int) -> str:
    """vLLM's /metrics text for one engine (label order and extra label sets as it has)."""
    lines = [f'vllm:request_success_total{{engine="0",finished_reason="length",model_name="m"}} '
             f'{done}.0',
             'vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 0.0',
             f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {tokens}.0',
             f'vllm:prompt_tokens_total{{engine="0",model_name="m"}} {tokens * 4}.0',
             'vllm:generation_tokens_created{engine="0",model_name="m"} 1.7e+09']
    for name, values in (("vllm:time_to_first_token_seconds", ttfts),
                         ("vllm:request_time_per_output_token_seconds", tpots)):
        lines.append(f'# TYPE {name} histogram')
        lines.append(f'{name}_sum{{engine="0",model_name="m"}} {sum(values)}')
        for le in (*BUCKETS, float("inf")):
            n = sum(v <= le for v in values)
            label = "+Inf" if le == float("inf") else str(le)
            lines.append(f'{name}_bucket{{engine="0",le="{label}",model_name="m"}} {n}.0')
        lines.append(f'{name}_count{{engine="0",model_name="m"}} {len(values)}.0')
    return "\n".join(lines) + "\n"


SLO = OmegaConf.create({"ttft_ms": 100, "tpot_ms": 10})
VLLM = NAMES["vllm"]


def test_the_objective_so_far_from_the_engine_counters():
    # warm-ups before the measured start: 2 requests, which the differences leave out
    base = Sample.parse(_metrics(2, [0.5, 0.5], [0.05, 0.05], 64), virtual_s=100.0)
    now = Sample.parse(_metrics(6, [0.5, 0.5, 0.005, 0.005, 0.05, 0.5],
                                [0.05, 0.05, 0.005, 0.005, 0.005, 0.05], 64 + 128), 104.0)
    d = now.since(base)
    assert d.virtual_s == 4.0 and d.counters["vllm:request_success"] == 4
    assert estimate("output_throughput", d, VLLM, 2, SLO, 3.0) == 128 / 4
    assert estimate("output_throughput_per_gpu", d, VLLM, 2, SLO, 3.0) == 128 / 4 / 2
    assert estimate("request_throughput", d, VLLM, 1, SLO, 3.0) == 1.0
    assert estimate("mean_ttft_ms", d, VLLM, 1, SLO, 3.0) == pytest.approx(
        (0.01 + 0.05 + 0.5) / 4 * 1e3)
    # the median of 0.005, 0.005, 0.05, 0.5: between the 0.01 and 0.1 bounds
    assert 10 <= estimate("median_ttft_ms", d, VLLM, 1, SLO, 3.0) <= 100
    assert 100 <= estimate("p99_ttft_ms", d, VLLM, 1, SLO, 3.0) <= 1000
    # goodput: 1 request/s, x the shares under the SLOs (TTFT 100 ms: 3 of 4; TPOT 10 ms:
    # the 0.01 bound's bucket, 3 of 4)
    assert estimate("goodput", d, VLLM, 1, SLO, 3.0) == pytest.approx(0.75 * 0.75)
    tokens_per_s = 128 * 5 / 4
    assert estimate("cost_per_million_tokens", d, VLLM, 2, SLO, 3.0) == pytest.approx(
        2 * 3.0 / 3600 / tokens_per_s * 1e6)
    # before any request finished, no latency is known
    assert estimate("mean_ttft_ms", base.since(base), VLLM, 1, SLO, 3.0) is None


def test_the_objective_so_far_from_sglangs_metrics():
    """data/sglang_metrics.txt is the /metrics of a real emulated SGLang 0.5.17 server (run
    with --enable-metrics) after 6 requests of 128/16 tokens sent at once, cut to the
    families read here and one they leave alone (cached_tokens); before them the server
    had no sample of these families, which reads as zero. Its client measured mean TTFT
    92.4 ms, E2E 161.0 ms and ITL 4.84 ms: the server's histograms start later, at the
    request's arrival in the tokenizer manager."""
    text = (Path(__file__).parent / "data" / "sglang_metrics.txt").read_text()
    d = Sample.parse(text, virtual_s=10.0).since(Sample.parse("", virtual_s=0.0))
    sglang = NAMES["sglang"]
    assert d.counters["sglang:num_requests"] == 6
    assert estimate("output_throughput", d, sglang, 1, SLO, 3.0) == 6 * 16 / 10
    assert estimate("total_token_throughput", d, sglang, 1, SLO, 3.0) == 6 * (128 + 16) / 10
    assert estimate("request_throughput", d, sglang, 1, SLO, 3.0) == 0.6
    assert estimate("mean_ttft_ms", d, sglang, 1, SLO, 3.0) == pytest.approx(
        0.4665110689984431 / 6 * 1e3)
    # a name with a digit in it (e2e), as vLLM's E2E histogram has too
    assert estimate("mean_e2el_ms", d, sglang, 1, SLO, 3.0) == pytest.approx(
        0.8918221769999946 / 6 * 1e3)
    assert estimate("mean_itl_ms", d, sglang, 1, SLO, 3.0) == pytest.approx(
        0.4244257190002827 / 90 * 1e3)
    assert 0 < estimate("p99_ttft_ms", d, sglang, 1, SLO, 3.0) < 1e3
    # no TPOT histogram: what needs TPOT is not known during the load
    assert estimate("mean_tpot_ms", d, sglang, 1, SLO, 3.0) is None
    assert estimate("goodput", d, sglang, 1, SLO, 3.0) is None


def test_a_pruned_sweep_asks_sglang_for_its_metrics(make_cfg, tmp_path):
    pruner = "sweep.pruner={kind:median}"
    sglang = bench_options(make_cfg("+model=llama8b", "engine=sglang", pruner), tmp_path)[0]
    assert sglang.engine_args[-1] == "--enable-metrics"
    alone = bench_options(make_cfg("+model=llama8b", "engine=sglang"), tmp_path)[0]
    assert "--enable-metrics" not in alone.engine_args
    vllm = bench_options(make_cfg("+model=llama8b", pruner), tmp_path)[0]
    assert vllm.engine_args == bench_options(make_cfg("+model=llama8b"), tmp_path)[0].engine_args


def test_the_pruner_comes_from_the_sweep_file():
    def sweep(pruner, metrics=("goodput_per_gpu",)):
        return OmegaConf.create({"pruner": pruner, "objectives": [
            {"metric": m, "direction": "maximize"} for m in metrics]})

    assert isinstance(make_pruner(sweep(None)), optuna.pruners.NopPruner)
    assert isinstance(make_pruner(sweep({"kind": "median", "n_startup_trials": 2})),
                      optuna.pruners.MedianPruner)
    assert isinstance(make_pruner(sweep({"kind": "hyperband"})), optuna.pruners.HyperbandPruner)
    for bad, message in (({"kind": "bogus"}, "unknown sweep.pruner.kind 'bogus'"),
                         ({"kind": "median", "n_startup": 2}, "sweep.pruner: "),
                         ({"kind": "median", "n_warmup_steps": -1}, "sweep.pruner: ")):
        with pytest.raises(ConfigError, match=message):
            make_pruner(sweep(bad))
    with pytest.raises(ConfigError, match="one objective"):
        make_pruner(sweep({"kind": "median"}, ("output_throughput", "p99_ttft_ms")))
    with pytest.raises(ConfigError, match="'duration' cannot be read during a load"):
        make_pruner(sweep({"kind": "median"}, ("duration",)))
    assert all(map(reportable, ("p99_itl_ms", "mean_e2el_ms", "total_token_throughput")))


class _Metrics(http.server.BaseHTTPRequestHandler):
    text = ""

    def do_GET(self):  # noqa: N802 (http.server's name)
        body = self.text.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_trial_worse_than_the_others_at_a_step_is_stopped():
    """Against a finished trial whose TTFT read 10 ms at every step, one reading 500 ms at
    its first tenth of requests is stopped there by the median pruner; the engine's /metrics
    is served over HTTP as vLLM serves it."""
    study = optuna.create_study(direction="minimize", pruner=optuna.pruners.MedianPruner(
        n_startup_trials=1, n_warmup_steps=0))
    done = study.ask()
    for step in range(1, STEPS):
        done.report(10.0, step)
    study.tell(done, 10.0)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    cfg = OmegaConf.create({
        "sweep": {"objectives": [{"metric": "mean_ttft_ms", "direction": "minimize"}]},
        "engine": {"name": "vllm"},
        "parallelism": {"tensor_parallel_size": 1, "pipeline_parallel_size": 1},
        "workload": {"slo": SLO, "num_prompts": 20}, "hardware": {"price_per_gpu_hour_usd": 3}})
    clock = iter([0.0, 1.0, 2.0])
    trial = study.ask()
    reports = LoadReports(trial, cfg, server.server_address[1], lambda: next(clock))
    try:
        _Metrics.text = _metrics(0, [], [], 0)
        reports()  # the measured start
        _Metrics.text = _metrics(1, [0.5], [0.01], 32)
        reports()  # 1 of 20 requests: no step reached yet
        assert study.trials[-1].intermediate_values == {}
        _Metrics.text = _metrics(2, [0.5, 0.5], [0.01, 0.01], 64)
        with pytest.raises(optuna.TrialPruned, match="stopped at 1/10 of its requests: "
                                                     "mean_ttft_ms 500 so far"):
            reports()
    finally:
        server.shutdown()
    assert study.trials[-1].intermediate_values == {1: 500.0}
