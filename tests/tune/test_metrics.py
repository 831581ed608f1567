"""Metrics derived from a benchmark summary and its per-request table."""

import math

import pandas as pd
import pytest
from omegaconf import OmegaConf

from revati.tune.metrics import (
    combine_repeats,
    is_known_metric,
    objective_values,
    read_requests,
    trial_metrics,
)
from revati.tune.trial import TrialError

SUMMARY = {"duration": 10.0, "completed": 4, "output_throughput": 400.0,
           "total_token_throughput": 2000.0, "p99_ttft_ms": 900.0, "model_id": "x",
           "num_gpu_blocks": 1000}


def test_derived_metrics(make_cfg, tmp_path):
    cfg = make_cfg("+model=llama8b", "parallelism.tensor_parallel_size=2",
                   "workload.slo.ttft_ms=1000", "workload.slo.tpot_ms=50")
    # Requests 1 and 2 meet both SLOs; 3 misses TTFT, 4 misses TPOT.
    pd.DataFrame({"ttft_ms": [100, 1000, 1001, 10], "tpot_ms": [10, 50, 10, 51]}).to_csv(
        tmp_path / "requests.csv", index=False)
    m = trial_metrics(cfg, SUMMARY, read_requests(tmp_path))
    assert m["num_gpus"] == 2
    assert m["goodput"] == pytest.approx(2 / 10.0)
    assert m["goodput_per_gpu"] == pytest.approx(0.1)
    assert m["output_throughput_per_gpu"] == 200.0
    price = cfg.hardware.price_per_gpu_hour_usd
    assert m["cost_per_million_tokens"] == pytest.approx(2 * price / 3600 / 2000 * 1e6)
    assert "model_id" not in m and m["num_gpu_blocks"] == 1000
    assert "host_cpu_ms" not in m and "cpu_dilation" not in m
    host = {"revati": {"host_cpu_ms": {"before": 17.5, "after": 28.0, "gpu_node": 17.3},
                       "cpu_dilation": {"factor": 1.59, "host_torch_ms": 9.5,
                                        "gpu_node_torch_ms": 15.1}}}
    m = trial_metrics(cfg, SUMMARY | host, None)
    assert m["host_cpu_ms"] == 28.0 and m["cpu_dilation"] == 1.59
    assert "runnable_per_core" not in m
    host["revati"] |= {"cores": 2, "cpu_contention": {"mean_runnable": 3.0}}
    assert trial_metrics(cfg, SUMMARY | host, None)["runnable_per_core"] == 1.5


def test_goodput_needs_requests(make_cfg, tmp_path):
    cfg = make_cfg("+model=llama8b")
    assert read_requests(tmp_path) is None
    m = trial_metrics(cfg, SUMMARY, None)
    assert "goodput" not in m
    objectives = OmegaConf.create([{"metric": "goodput_per_gpu", "direction": "maximize"}])
    with pytest.raises(TrialError, match="no finite 'goodput_per_gpu'"):
        objective_values(m, objectives)
    pd.DataFrame({"ttft": [1.0]}).to_csv(tmp_path / "requests.csv", index=False)
    with pytest.raises(TrialError, match="lacks the ttft_ms/tpot_ms"):
        trial_metrics(cfg, SUMMARY, read_requests(tmp_path))
    (tmp_path / "requests.csv").write_text("")
    with pytest.raises(TrialError, match="unreadable requests.csv"):
        read_requests(tmp_path)


def test_nan_objective_fails(make_cfg):
    objectives = OmegaConf.create([{"metric": "p99_ttft_ms", "direction": "minimize"}])
    with pytest.raises(TrialError):
        objective_values({"p99_ttft_ms": math.nan}, objectives)
    assert objective_values({"p99_ttft_ms": 3.0}, objectives) == [3.0]


@pytest.mark.parametrize("name,known", [("p99_ttft_ms", True), ("median_e2el_ms", True),
                                        ("p99.9_itl_ms", True), ("goodput_per_gpu", True),
                                        ("output_throughput", True), ("p99_ttft", False),
                                        ("throughput", False)])
def test_known_metrics(name, known):
    assert is_known_metric(name) is known


def test_repeated_loads_give_medians_and_the_spread_of_what_the_ranking_shows():
    """trial.repeats: each metric every load has becomes its median; the objectives and key
    metrics also keep their lowest and highest; a metric one load lacks is left out."""
    runs = [{"mean_ttft_ms": 30.0, "output_throughput": 900.0, "wall_s": 50.0},
            {"mean_ttft_ms": 42.0, "output_throughput": 910.0, "wall_s": 52.0},
            {"mean_ttft_ms": 33.0, "output_throughput": 880.0}]
    out = combine_repeats(runs, ["mean_ttft_ms", "output_throughput", "goodput"])
    assert out == {"mean_ttft_ms": 33.0, "output_throughput": 900.0, "repeats": 3.0,
                   "mean_ttft_ms_min": 30.0, "mean_ttft_ms_max": 42.0,
                   "output_throughput_min": 880.0, "output_throughput_max": 910.0}
    assert combine_repeats(runs[:1], ["mean_ttft_ms"]) == runs[0]
