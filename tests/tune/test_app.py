"""revati-tune end to end: bad input stops before any trial; a sweep whose benchmarks all
fail still records every trial (Optuna storage and MLflow) and reports; re-running resumes."""

import json
import sys
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient
from optuna.trial import TrialState

from revati.tune.app import hydra_argv, main, select_not_append

# An engine flag vLLM refuses: every launched trial fails for real, in seconds (vllm serve
# exits at argument parsing), which is what the failure-path tests need.
FAILING_ENGINE = "engine.extra_args=[--no-such-vllm-flag]"


@pytest.mark.parametrize("args,bad", [
    (["+model=gpt5"], "unknown model 'gpt5'"),
    (["+model=llama70b", "sweep=nope"], "unknown sweep 'nope'"),
    (["+model=llama70b", "parallelism.tensor_parallel_size=3", "sweep=batching"],
     "tensor_parallel_size=3 does not divide num_attention_heads=64"),
    (["+model=llama70b", "sweep==tp_pp"], "malformed override 'sweep==tp_pp'"),
    (["+model=llama70b", "workload.num_prompts=many"], "workload.num_prompts='many'"),
    (["+model=llama70b", "nokey=3"], "Could not override 'nokey'"),
    (["~model", "sweep=tp_pp"], "no model chosen: add model=NAME"),
    (["+model=llama8b", "sweep.objectives.0.metric=speed"], "unknown objective metric 'speed'"),
    (["+model=llama8b", "sweep=scheduler", "engine=sglang"],
     "sweeps 'scheduler.enable_chunked_prefill', which engine 'sglang' has no flag for"),
    (["+model=llama8b", "sweep=rate_capacity", "sweep.sampler=grid"], "no grid"),
    (["+model=llama8b", "study.storage=nosuchdb://host/x"],
     "cannot open study.storage 'nosuchdb://host/x'"),
    (["+model=llama8b", "study.storage=sqlite:////nonexistent/dir/optuna.db"],
     "cannot open study.storage 'sqlite:////nonexistent/dir/optuna.db'"),
    (["+model=llama8b", "workload=long_context", "engine.max_model_len=4096"],
     "input_len=6144 + output_len=256 exceeds max_model_len=4096"),
    (["+model=llama8b", "sweep=batching", "parallelism.tensor_parallel_size=8",
      "parallelism.host_cores=2", "trial.max_wall_min=1"], "exceeds trial.max_wall_min=1"),
    (["+model=llama8b", "trial.max_wall_min=0"], "trial.max_wall_min=0 must be a positive"),
    (["+model=llama8b", "trial.share_engine=maybe"], "trial.share_engine='maybe' must be true"),
    (["+model=llama8b", "trial.repeats=0"], "trial.repeats=0 must be a positive integer"),
    (["+model=llama8b", "workload=azure_conv", "workload.trace=nope.csv"],
     "workload.trace: trace nope.csv does not exist (shipped traces: azure_conv_2023)"),
    (["+model=llama8b", "workload=azure_conv", "workload.trace=bad.csv"],
     "workload.trace: bad.csv:3: not a number"),
    (["+model=llama8b", "workload.dataset=alpaca"], "unknown workload.dataset 'alpaca'"),
    (["+model=llama8b", "hardware=z999"], "unknown hardware 'z999'"),
    (["+model=llama8b", "hydra.run.dir=/proc/nope/x"],
     "hydra.run.dir=/proc/nope/x: cannot write under /proc"),
    (["+model=llama8b", "workload.num_warmups=-1"], "workload.num_warmups=-1 must be a count"),
    (["+model=llama8b", "workload.request_rate=-1"],
     "workload.request_rate=-1 must be a positive number"),
    (["+model=llama8b", "workload.num_prompts=0"],
     "workload.num_prompts=0 must be a positive integer"),
    (["+model=llama8b", "mlflow.tracking_uri=nosuch://x"],
     "cannot open mlflow.tracking_uri 'nosuch://x'"),
])
def test_bad_input_fails_before_any_trial(tmp_path, monkeypatch, capsys, args, bad):
    # In-process (the console script's own main) to keep these cases fast.
    monkeypatch.chdir(tmp_path)
    # a trace whose second request has a length that is not a number
    (tmp_path / "bad.csv").write_text("timestamp,input_length,output_length\n"
                                      "0.0,100,10\n0.5,lots,10\n")
    monkeypatch.setattr(sys, "argv", ["revati-tune", *args])
    shm_before = set(Path("/dev/shm").iterdir())
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("revati-tune: error: ") and bad in lines[0]
    # no trial, hence no Timekeeper segment and no engine
    assert not list(tmp_path.glob("outputs/revati-tune/*/trials/*"))
    assert set(Path("/dev/shm").iterdir()) <= shm_before


def test_bad_input_from_the_console_script(run_tune, tmp_path):
    proc = run_tune(tmp_path, "+model=llama70b", "parallelism.tensor_parallel_size=3",
                    "sweep=batching")
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("revati-tune: error: infeasible configuration: "
                                   "tensor_parallel_size=3 does not divide "
                                   "num_attention_heads=64 of llama3_70b")


def test_model_is_selected_with_or_without_plus(make_cfg):
    assert select_not_append(["+model=llama70b", "+x.y=1", "sweep=tp_pp"]) == [
        "model=llama70b", "+x.y=1", "sweep=tp_pp"]
    assert make_cfg().model.name == "llama3_8b"  # the default: a bare revati-tune runs
    assert make_cfg("+model=llama70b").model.name == make_cfg("model=llama70b").model.name


def test_model_aliases_are_rewritten_to_catalog_names(make_cfg):
    assert hydra_argv(["+model=llama70b", "-m", "model=llama8b,qwen2_5_7b", "x.model=llama8b"]) == [
        "model=llama3_70b", "-m", "model=llama3_8b,qwen2_5_7b", "x.model=llama8b"]
    assert make_cfg("model=llama70b").model.name == "llama3_70b"


def _study(out: Path) -> optuna.Study:
    [db] = out.glob("outputs/revati-tune/*/optuna.db")
    [summary] = optuna.get_all_study_summaries(f"sqlite:///{db}")
    return optuna.load_study(study_name=summary.study_name, storage=f"sqlite:///{db}")


def _mlflow(out: Path) -> MlflowClient:
    return MlflowClient(f"sqlite:///{out}/outputs/revati-tune/mlflow.db")


def test_failing_trials_are_recorded_and_rerun_resumes(run_tune, tmp_path):
    # two GPUs: the two layouts that hold the weights on two launch (and fail), however few
    # cores this host has (host_cores); every failure path is taken with two as with eight
    args = ["+model=llama70b", "sweep=tp_pp", "workload.num_prompts=10",
            "parallelism.max_gpus=2", "parallelism.host_cores=16", FAILING_ENGINE]
    first = run_tune(tmp_path, *args, timeout=1800)
    assert first.returncode == 0, first.stderr
    study = _study(tmp_path)
    assert study.study_name.startswith("engine.extra_args=")
    trials = study.trials
    # The whole 4 x 3 grid: 10 configurations infeasible, 2 launched and failed.
    assert len(trials) == 12
    pruned = [t for t in trials if t.state == TrialState.PRUNED]
    failed = [t for t in trials if t.state == TrialState.FAIL]
    assert len(pruned) == 10 and len(failed) == 2
    assert {(t.params["parallelism.tensor_parallel_size"],
             t.params["parallelism.pipeline_parallel_size"]) for t in failed} == {(2, 1), (1, 2)}
    reasons = {(t.params["parallelism.tensor_parallel_size"],
                t.params["parallelism.pipeline_parallel_size"]): t.user_attrs["infeasible_reason"]
               for t in pruned}
    assert "max_gpus=2" in reasons[8, 4] and "weights 131.4 GiB" in reasons[1, 1]
    assert all("vllm start-up failed (exit" in t.user_attrs["fail_reason"] for t in failed)
    assert "Infeasible configurations" in first.stdout and "Failed trials" in first.stdout
    report = next(tmp_path.glob("outputs/revati-tune/*/report.md")).read_text()
    assert "none: no trial completed" in report and "vllm start-up failed (exit" in report

    client = _mlflow(tmp_path)
    exp = client.get_experiment_by_name("revati-tune")
    runs = client.search_runs([exp.experiment_id], max_results=100)
    [parent] = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == 12
    assert parent.data.params["model.name"] == "llama3_70b"
    assert parent.data.metrics["trials_fail"] == 2
    for child in children:
        p = child.data.params
        assert p["model.config.num_attention_heads"] == "64"
        assert p["hardware_key"] == "h200_sxm" and p["workload.num_prompts"] == "10"
        assert child.data.tags["revati.reason"]
        assert child.info.status == ("KILLED" if child.data.tags["revati.state"] == "PRUNED"
                                     else "FAILED")
    failed_run = next(c for c in children if c.data.tags["revati.state"] == "FAIL")
    artifacts = {a.path for a in client.list_artifacts(failed_run.info.run_id)}
    assert {"config.yaml", "bench.log", "command.txt"} <= artifacts

    # Same command again: same study, grid already done, no new trial, same parent run.
    again = run_tune(tmp_path, *args, timeout=600)
    assert again.returncode == 0, again.stderr
    assert len(_study(tmp_path).trials) == 12
    runs = client.search_runs([exp.experiment_id], max_results=100)
    assert len(runs) == 13

    # study.retry_failed: the same study runs each failed configuration once more, and only those
    retried = run_tune(tmp_path, *args, "study.retry_failed=true", timeout=1200)
    assert retried.returncode == 0, retried.stderr
    trials = _study(tmp_path).trials
    assert len(trials) == 14
    assert {(t.params["parallelism.tensor_parallel_size"],
             t.params["parallelism.pipeline_parallel_size"])
            for t in trials[12:]} == {(2, 1), (1, 2)}
    assert all(t.state == TrialState.FAIL for t in trials[12:])


def test_raising_the_budget_resumes_a_tpe_study(run_tune, tmp_path):
    args = ["+model=llama8b", "sweep=batching", "workload.num_prompts=10", FAILING_ENGINE]
    assert run_tune(tmp_path, *args, "sweep.n_trials=2", timeout=1200).returncode == 0
    assert len(_study(tmp_path).trials) == 2
    proc = run_tune(tmp_path, *args, "sweep.n_trials=3", timeout=1200)
    assert proc.returncode == 0, proc.stderr
    study = _study(tmp_path)
    assert isinstance(study.sampler, optuna.samplers.BaseSampler)
    assert len(study.trials) == 3
    # A resumed study must not replay the first proposals.
    params = [json.dumps(t.params, sort_keys=True) for t in study.trials]
    assert len(set(params)) == len(params)


def test_two_workers_started_by_the_launcher_share_one_study(run_tune, tmp_path):
    """Issue #28, item 3: Hydra's joblib launcher starts `worker=0,1` as two processes at
    once; the worker key stays out of the study's name, so both draw from one study (its
    SQLite file) and split the grid: every point runs once, each worker runs some."""
    # two GPUs: two of the twelve layouts launch (and fail in seconds), ten are infeasible
    args = ["-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "worker=0,1",
            "+model=llama70b", "sweep=tp_pp", "workload.num_prompts=10",
            "parallelism.max_gpus=2", "parallelism.host_cores=16", FAILING_ENGINE]
    proc = run_tune(tmp_path, *args, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    study = _study(tmp_path)
    assert "worker" not in study.study_name
    points = {tuple(sorted(t.params.items())) for t in study.trials}
    assert len(points) == 12
    assert sum(t.state == TrialState.FAIL for t in study.trials) >= 2  # both at once: 3
    assert all(t.state in (TrialState.PRUNED, TrialState.FAIL) for t in study.trials)
    client = _mlflow(tmp_path)
    exp = client.get_experiment_by_name("revati-tune")
    runs = client.search_runs([exp.experiment_id], max_results=100)
    trials = [r for r in runs if "revati.trial" in r.data.tags]
    assert {r.data.params["worker"] for r in trials} == {"0", "1"}
    assert sorted(int(r.data.tags["revati.trial"]) for r in trials) == sorted(
        t.number for t in study.trials)
