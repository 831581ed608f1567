"""revati-tune end to end with real emulated vLLM trials (issue 5, done-when 1 and 2).

A one-GPU budget leaves one point of the tp_pp grid feasible: that trial runs the real
`revati bench` (emulated vLLM on an emulated H200), the other eleven are pruned before
launch; the test then reads Optuna's storage and the MLflow store back, and re-runs the
command to check that it resumes without repeating the finished trial."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import optuna
import pytest
from mlflow.tracking import MlflowClient
from optuna.trial import TrialState

from tests.timewarp.conftest import alive, descendants

pytestmark = pytest.mark.e2e

ARGS = ["+model=llama3_8b", "sweep=tp_pp", "parallelism.max_gpus=1",
        "workload.num_prompts=10", "workload.input_len=128", "workload.output_len=32",
        "workload.request_rate=10", "engine.max_model_len=4096"]


def test_sweep_with_a_real_trial_is_tracked_and_resumes(run_tune, tmp_path):
    """With trial.repeats=2 the trial runs its load twice on its engine: its metrics are the
    two loads' medians with the objective's and key metrics' lowest and highest."""
    args = [*ARGS, "trial.repeats=2"]
    first = run_tune(tmp_path, *args, timeout=2400)
    assert first.returncode == 0, first.stderr[-3000:]
    [storage] = tmp_path.glob("outputs/revati-tune/*/optuna.db")
    study = optuna.load_study(study_name=None, storage=f"sqlite:///{storage}")
    done = [t for t in study.trials if t.state == TrialState.COMPLETE]
    pruned = [t for t in study.trials if t.state == TrialState.PRUNED]
    assert len(done) == 1 and len(pruned) == 11, [t.user_attrs for t in study.trials]
    assert done[0].params == {"parallelism.tensor_parallel_size": 1,
                              "parallelism.pipeline_parallel_size": 1}
    assert all("max_gpus=1" in t.user_attrs["infeasible_reason"] for t in pruned)
    # the plan printed before the first trial: the one layout to run with its estimated
    # wall time, and why each other is skipped (issue #26, item 2)
    assert "[revati-tune] 1 of 12 configurations to run, estimated ~" in first.stdout
    assert "TP1 PP1: ~" in first.stdout and "TP8 PP4: skipped: " in first.stdout

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/outputs/revati-tune/mlflow.db")
    exp = client.get_experiment_by_name("revati-tune")
    runs = client.search_runs([exp.experiment_id], max_results=100)
    [parent] = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == 12
    [ran] = [c for c in children if c.info.status == "FINISHED"]
    assert ran.data.params["parallelism.tensor_parallel_size"] == "1"
    assert ran.data.params["workload.num_prompts"] == "10"
    metrics = ran.data.metrics
    assert metrics["completed"] == 10 and metrics["mean_ttft_ms"] > 0
    assert metrics["output_throughput"] > 0 and metrics["num_gpu_blocks"] > 0
    artifacts = {a.path for a in client.list_artifacts(ran.info.run_id)}
    assert {"summary.json", "requests.csv", "config.yaml"} <= artifacts
    summary = json.loads(open(client.download_artifacts(ran.info.run_id, "summary.json",
                                                        str(tmp_path))).read())
    assert summary["completed"] == 10
    [trial] = tmp_path.glob(f"outputs/revati-tune/*/trials/trial-{done[0].number:04d}")
    second = json.loads((trial / "repeat-2" / "summary.json").read_text())
    assert second["completed"] == 10 and "started for an earlier trial" in (
        trial / "repeat-2" / "bench.log").read_text()
    loads = [summary["mean_tpot_ms"], second["mean_tpot_ms"]]
    assert metrics["repeats"] == 2
    assert metrics["mean_tpot_ms"] == pytest.approx(sum(loads) / 2)
    assert (metrics["mean_tpot_ms_min"], metrics["mean_tpot_ms_max"]) == (min(loads), max(loads))
    assert metrics["goodput_per_gpu_min"] <= metrics["goodput_per_gpu"] <= metrics[
        "goodput_per_gpu_max"]
    report = next(tmp_path.glob("outputs/revati-tune/*/report.md")).read_text()
    assert "goodput_per_gpu range" in report

    again = run_tune(tmp_path, *args, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    study = optuna.load_study(study_name=None, storage=f"sqlite:///{storage}")
    assert len(study.trials) == 12  # nothing repeated
    assert len(client.search_runs([exp.experiment_id], max_results=100)) == 13


def test_sigterm_ends_the_sweep_and_the_engine_it_started(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "revati.tune.app", *ARGS,
                             "study.show_progress=false"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not any("vllm.entrypoints.cli.main serve" in cmd
                  for cmd in descendants(proc.pid).values()):
        assert time.monotonic() < deadline, "no engine started"
        time.sleep(0.5)
    time.sleep(2)  # the engine's own children too
    tree = descendants(proc.pid)
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=120) != 0
    time.sleep(1)
    assert not {pid: cmd for pid, cmd in tree.items() if alive(pid)}


def _sweep(run_tune, tmp_path, args: list[str]) -> optuna.Study:
    """Run the sweep to its end and return its study."""
    proc = run_tune(tmp_path, *args, timeout=2400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [storage] = tmp_path.glob("outputs/revati-tune/*/optuna.db")
    return optuna.load_study(study_name=None, storage=f"sqlite:///{storage}")


def test_one_study_compares_the_two_engines(run_tune, tmp_path):
    """sweep=engine: vLLM and SGLang are two values of one parameter, so one study runs
    both (at TP 1 within a one-GPU budget) and ranks them by the same objective."""
    args = ["+model=llama3_8b", "sweep=engine", "parallelism.max_gpus=1",
            "workload.num_prompts=8", "workload.input_len=128", "workload.output_len=16",
            "workload.request_rate=10", "engine.max_model_len=4096"]
    study = _sweep(run_tune, tmp_path, args)
    done = {t.params["engine"]: t for t in study.trials if t.state == TrialState.COMPLETE}
    assert set(done) == {"vllm", "sglang"}, [t.user_attrs for t in study.trials]
    assert all(t.params["parallelism.tensor_parallel_size"] == 1 for t in done.values())
    for engine, t in done.items():
        summary = json.loads(next(tmp_path.glob(
            f"outputs/revati-tune/*/trials/trial-{t.number:04d}/summary.json")).read_text())
        assert summary["revati"]["engine"] == engine and summary["completed"] == 8
    report = next(tmp_path.glob("outputs/revati-tune/*/report.md")).read_text()
    assert "sglang" in report and "vllm" in report


def test_a_pruner_stops_a_losing_trial_on_the_shared_engine(run_tune, tmp_path):
    """Issue #28, items 1 and 2: two trials that differ only in their load share one engine;
    by mean TTFT, the second (every request at once) is worse than the first (2 requests/s)
    from its first tenth of requests on, and the median pruner stops it there (seed 1 puts
    rate 2 first in the grid's order)."""
    args = ["+model=llama3_8b", "sweep=tp_pp", "~sweep.params",
            "+sweep.params={workload.request_rate:{choices:[2,inf]}}",
            "sweep.objectives=[{metric:mean_ttft_ms,direction:minimize}]",
            "sweep.pruner={kind:median,n_startup_trials:1,n_warmup_steps:0}", "seed=1",
            "workload.num_prompts=20", "workload.input_len=1024", "workload.output_len=128",
            "+workload.range_ratio=0.9", "engine.max_model_len=4096"]
    study = _sweep(run_tune, tmp_path, args)
    first, second = study.trials
    assert first.params["workload.request_rate"] == 2 and first.state == TrialState.COMPLETE
    assert second.state == TrialState.PRUNED, second.user_attrs
    assert "stopped at " in second.user_attrs["stopped_early"]
    steps = second.intermediate_values
    assert steps and max(steps) < 10 and min(steps.values()) > first.values[0]
    trials = next(tmp_path.glob("outputs/revati-tune/*/trials"))
    assert "started for an earlier trial" in (trials / "trial-0001" / "bench.log").read_text()
    report = next(tmp_path.glob("outputs/revati-tune/*/report.md")).read_text()
    stopped = report.split("## Stopped early")[1].split("##")[0]
    assert "request_rate=inf" in stopped and "stopped at " in stopped
    assert "request_rate=inf" not in report.split("## Infeasible")[1].split("##")[0]
