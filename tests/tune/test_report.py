"""End-of-sweep report and plots, from a study holding every kind of trial."""

import numpy as np
import optuna
import pandas as pd
from omegaconf import OmegaConf
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

from revati.bench.results import write_requests_csv
from revati.tune.metrics import read_requests
from revati.tune.plots import latency_cdf, latency_values, pareto_mask
from revati.tune.report import build_report, point_label

PNG = b"\x89PNG"
OBJECTIVES = OmegaConf.create([{"metric": "output_throughput", "direction": "maximize"},
                               {"metric": "p99_ttft_ms", "direction": "minimize"}])
RATE = {"workload.request_rate": FloatDistribution(0.5, 64.0, log=True)}


def _study() -> optuna.Study:
    study = optuna.create_study(directions=["maximize", "minimize"], study_name="s")
    # (rate, throughput, p99 TTFT): rates 1, 2 and 8 are on the front, 4 is dominated by 8.
    for rate, tput, ttft in ((1.0, 100.0, 50.0), (2.0, 200.0, 80.0), (4.0, 300.0, 900.0),
                             (8.0, 400.0, 700.0)):
        study.add_trial(create_trial(
            params={"workload.request_rate": rate}, distributions=RATE, values=[tput, ttft],
            user_attrs={"metrics": {"output_throughput": tput, "p99_ttft_ms": ttft,
                                    "cost_per_million_tokens": 1000 / tput}}))
    study.add_trial(create_trial(params={"workload.request_rate": 16.0}, distributions=RATE,
                                 state=TrialState.PRUNED,
                                 user_attrs={"infeasible_reason": "too many GPUs"}))
    study.add_trial(create_trial(params={"workload.request_rate": 24.0}, distributions=RATE,
                                 state=TrialState.PRUNED,
                                 user_attrs={"stopped_early": "stopped at 3/10"}))
    study.add_trial(create_trial(params={"workload.request_rate": 32.0}, distributions=RATE,
                                 state=TrialState.FAIL, user_attrs={"fail_reason": "bench died"}))
    # failed, then completed when retried (study.retry_failed); one a killed sweep left behind
    study.add_trial(create_trial(params={"workload.request_rate": 2.0}, distributions=RATE,
                                 state=TrialState.FAIL, user_attrs={"fail_reason": "hung"}))
    study.add_trial(create_trial(params={"workload.request_rate": 48.0}, distributions=RATE,
                                 state=TrialState.FAIL))
    return study


def test_report_ranks_and_explains(tmp_path):
    report = build_report(_study(), OBJECTIVES, tmp_path)
    assert report.counts == {"COMPLETE": 4, "PRUNED": 2, "FAIL": 3}
    text = (tmp_path / "report.md").read_text()
    assert text == report.text
    best = text.split("## Best configurations")[1].split("##")[0].strip().splitlines()
    # Pareto trials first, by throughput (the first objective), then the dominated one.
    assert [row.split()[0] for row in best[1:]] == ["3", "1", "0", "2"]
    assert "request_rate=8.0" in best[1] and "True" in best[1] and "False" in best[4]
    # Key metrics the trials have join the objectives; those they lack are left out.
    assert "cost_per_million_tokens" in best[0] and "goodput_per_gpu" not in best[0]
    assert float(best[1].split()[-1]) == 2.5
    assert "too many GPUs" in text and "bench died" in text
    assert "runnable_per_core" not in text
    # infeasible and stopped-early trials are both PRUNED, each listed under its own title
    infeasible = text.split("## Infeasible")[1].split("##")[0]
    stopped = text.split("## Stopped early")[1].split("##")[0]
    assert "too many GPUs" in infeasible and "stopped at" not in infeasible
    assert "stopped at 3/10" in stopped and "too many GPUs" not in stopped
    assert {p.name for p in report.plots} == {"throughput_latency.png", "pareto_front.png"}
    assert all(p.read_bytes().startswith(PNG) for p in report.plots)
    failed = {int(row.split()[0]): row for row in
              text.split("## Failed trials")[1].strip().splitlines()[1:]}
    assert "bench died" in failed[6] and "completed in" not in failed[6]
    assert "(completed in trial 1) hung" in failed[7]
    assert "no result: the sweep ended while it ran" in failed[8]


def test_report_says_which_trials_took_turns_on_the_cores(tmp_path):
    study = optuna.create_study(directions=["maximize", "minimize"], study_name="cores")
    for rate, runnable in ((1.0, 0.6), (2.0, 1.9)):
        study.add_trial(create_trial(
            params={"workload.request_rate": rate}, distributions=RATE, values=[rate, 1.0],
            user_attrs={"metrics": {"output_throughput": rate, "p99_ttft_ms": 1.0,
                                    "runnable_per_core": runnable}}))
    text = build_report(study, OBJECTIVES, tmp_path).text
    best = text.split("## Best configurations")[1].split("##")[0]
    assert "runnable_per_core" in best.splitlines()[1]
    assert "runnable_per_core above 1: those trials' engine processes took turns" in best
    one = optuna.create_study(directions=["maximize", "minimize"], study_name="one")
    one.add_trial(create_trial(
        params={"workload.request_rate": 1.0}, distributions=RATE, values=[1.0, 1.0],
        user_attrs={"metrics": {"output_throughput": 1.0, "p99_ttft_ms": 1.0,
                                "runnable_per_core": 1.0}}))
    assert "took turns" not in build_report(one, OBJECTIVES, tmp_path).text


def test_report_without_completed_trials(tmp_path):
    study = optuna.create_study(study_name="empty")
    study.add_trial(create_trial(params={"workload.request_rate": 1.0}, distributions=RATE,
                                 state=TrialState.FAIL, user_attrs={"fail_reason": "no bench"}))
    objectives = OmegaConf.create([{"metric": "goodput_per_gpu", "direction": "maximize"}])
    report = build_report(study, objectives, tmp_path)
    assert report.plots == [] and "none: no trial completed" in report.text
    assert "no bench" in report.text and "no throughput_latency.png" in report.text


def test_pareto_mask():
    points = np.array([[100, 50], [200, 80], [300, 900], [400, 700], [400, 700]])
    assert pareto_mask(points, [True, False]).tolist() == [True, True, False, True, True]
    assert pareto_mask(points, [False, False]).tolist() == [True, False, False, False, False]


def test_latency_cdf(tmp_path):
    df = pd.DataFrame({"ttft_ms": np.linspace(10, 500, 50), "tpot_ms": np.linspace(5, 40, 50)})
    path = latency_cdf(df, tmp_path / "cdf.png")
    assert path.read_bytes().startswith(PNG)
    assert latency_cdf(pd.DataFrame({"input_len": [1]}), tmp_path / "none.png") is None
    assert not (tmp_path / "none.png").exists()


def test_the_itl_cdf_counts_every_token_of_a_benchmarks_requests_csv(tmp_path):
    # requests.csv as `revati bench` writes it: a request's ITLs are one JSON list
    raw = {"input_lens": [4, 4, 4], "output_lens": [3, 1, 4], "ttfts": [0.02, 0.03, 0.01],
           "itls": [[0.005, 0.007], [], [0.004, 0.006, 0.0065]], "start_times": [0.0, 0.1, 0.2]}
    write_requests_csv(raw, tmp_path / "requests.csv")
    requests = read_requests(tmp_path)
    assert latency_values(requests, "itl_ms").tolist() == [4.0, 5.0, 6.0, 6.5, 7.0]
    assert latency_values(requests, "ttft_ms").tolist() == [10.0, 20.0, 30.0]
    assert latency_cdf(requests, tmp_path / "cdf.png").read_bytes().startswith(PNG)


def test_plot_points_are_labelled_with_their_configuration():
    assert point_label({"parallelism.tensor_parallel_size": 2,
                        "parallelism.pipeline_parallel_size": 4}) == "TP2 PP4"
    assert point_label({"scheduler.max_num_seqs": 64, "workload.request_rate": 8.0,
                        "scheduler.policy": "fcfs"}) == "seqs=64 rate=8 policy=fcfs"


def test_repeated_loads_show_ranges_and_which_trials_the_spread_does_not_separate(tmp_path):
    """trial.repeats > 1: the ranking gives each objective's range over the loads and says
    which trials' ranges of the first objective overlap the first row's."""
    study = optuna.create_study(directions=["maximize"], study_name="repeats")
    for rate, (low, mid, high) in ((1.0, (90.0, 100.0, 104.0)), (2.0, (101.0, 103.0, 110.0)),
                                   (4.0, (60.0, 70.0, 80.0))):
        study.add_trial(create_trial(
            params={"workload.request_rate": rate}, distributions=RATE, values=[mid],
            user_attrs={"metrics": {"output_throughput": mid, "output_throughput_min": low,
                                    "output_throughput_max": high, "repeats": 3.0}}))
    objective = OmegaConf.create([{"metric": "output_throughput", "direction": "maximize"}])
    text = build_report(study, objective, tmp_path).text
    best = text.split("## Best configurations")[1].split("##")[0].strip().splitlines()
    assert "output_throughput range" in best[0]
    assert [row.split()[0] for row in best[1:4]] == ["1", "0", "2"]
    assert "101-110" in best[1] and "60-80" in best[3]
    assert ("Over 3 loads each, the output_throughput range of trial 0 overlaps the first "
            "row's (trial 1): this host's run-to-run spread does not separate it from that "
            "row") in text
    # one load per trial: no ranges, nothing said
    assert "range" not in build_report(_study(), OBJECTIVES, tmp_path).text
