"""How many trials an hour does a sweep evaluate, before and after #28? (issue #28, item 5)

Runs the `batching` sweep of Llama-3.1-8B (TPE, seed 0, --trials trials, the sweep file's
embedded load) twice on this host, one after the other:

- before: every trial on a fresh engine, no pruner (`trial.share_engine=false
  sweep.pruner=null`), the tuner as it was when the issue was filed;
- after: trials share an engine where their engine is equal, and Optuna's median pruner
  stops losing trials at a tenth of their load (the one docs/tune.md shows).

Prints per variant the wall time, the trials per hour, how the trials ended, where a trial's
wall time goes (engine start-up against the load, from each trial's Optuna times and its
summary's load wall time), and the best configuration found.

    PYTHONPATH=. .venv/bin/python tools/cost/sweep_throughput.py --out OUT [--trials 20]

Each variant's study, trials, MLflow store and vLLM compile cache (empty at its start, so
neither variant loads what the other compiled) stay in OUT/<variant>; a variant whose study
is already there is reported, not run again. Run it on a quiet host.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import optuna

PRUNER = "sweep.pruner={kind:median,n_startup_trials:5,n_warmup_steps:2}"
VARIANTS = {
    "before": ["trial.share_engine=false", "sweep.pruner=null"],
    "after": ["trial.share_engine=true", PRUNER],
}


def run(out: Path, trials: int, overrides: list[str]) -> None:
    """Run the sweep into out, and its wall time into out/wall.json."""
    out.mkdir(parents=True)
    cmd = [str(Path(sys.executable).with_name("revati-tune")), "+model=llama8b",
           "sweep=batching", "sweep.sampler=tpe", f"sweep.n_trials={trials}", "seed=0",
           *overrides, f"hydra.run.dir={out}",
           f"mlflow.tracking_uri=sqlite:///{out}/mlflow.db",
           f"mlflow.artifact_root={out}/mlartifacts"]
    (out / "command.txt").write_text(" ".join(cmd) + "\n")
    # vLLM's torch.compile cache starts empty for each variant: a compile range
    # (max_num_batched_tokens) that one variant compiled would load in 1 s in the other
    env = os.environ | {"VLLM_CACHE_ROOT": str(out / "vllm-cache")}
    t0 = time.monotonic()
    with (out / "tune.log").open("w") as log:
        r = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"sweep failed: see {out}/tune.log")
    (out / "wall.json").write_text(json.dumps({"wall_s": wall}) + "\n")


def load_wall_s(out: Path, number: int) -> float | None:
    """The load's wall time of a trial (its summary), None when it has none."""
    summary = out / "trials" / f"trial-{number:04d}" / "summary.json"
    return json.loads(summary.read_text()).get("wall_s") if summary.is_file() else None


def describe(out: Path) -> dict:
    storage = f"sqlite:///{out}/optuna.db"
    (summary,) = optuna.get_all_study_summaries(storage)
    study = optuna.load_study(study_name=summary.study_name, storage=storage)
    wall = json.loads((out / "wall.json").read_text())["wall_s"]
    states: dict[str, int] = {}
    trial_s, load_s = [], []
    for t in study.trials:
        kind = ("infeasible" if "infeasible_reason" in t.user_attrs
                else "stopped early" if "stopped_early" in t.user_attrs else t.state.name.lower())
        states[kind] = states.get(kind, 0) + 1
        if t.datetime_start and t.datetime_complete and kind != "infeasible":
            trial_s.append((t.datetime_complete - t.datetime_start).total_seconds())
            lw = load_wall_s(out, t.number)
            if lw is not None:
                load_s.append(lw)
    done = any(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    best = study.best_trial if done else None  # by the sweep's objective and direction
    return {"wall_s": wall, "trials": len(study.trials), "states": states,
            "trials_per_h": len(study.trials) * 3600 / wall,
            "trial_s": statistics.median(trial_s) if trial_s else None,
            "load_s": statistics.median(load_s) if load_s else None,
            "best": None if best is None else {"number": best.number, "params": best.params,
                                               "value": best.value}}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--trials", type=int, default=20)
    args = p.parse_args()
    rows = {}
    for name, overrides in VARIANTS.items():
        out = (args.out / name).resolve()
        if not (out / "wall.json").exists():
            print(f"{name}: running {args.trials} trials ...", file=sys.stderr)
            run(out, args.trials, overrides)
        rows[name] = describe(out)
    print("| variant | wall | trials/h | trials | median trial | median load | best |")
    print("|---|---:|---:|---|---:|---:|---|")
    for name, r in rows.items():
        states = ", ".join(f"{n} {k}" for k, n in sorted(r["states"].items()))
        best = r["best"]
        best_s = "none" if best is None else (
            f"#{best['number']} {best['params']}: {best['value']:.4g}")
        med = r["trial_s"] and f"{r['trial_s']:.0f} s"
        load = r["load_s"] and f"{r['load_s']:.0f} s"
        print(f"| {name} | {r['wall_s'] / 60:.1f} min | {r['trials_per_h']:.1f} | {states} "
              f"| {med} | {load} | {best_s} |")
    before, after = rows["before"], rows["after"]
    ratio = after["trials_per_h"] / before["trials_per_h"]
    print(f"\ntrials per hour, after / before: x{ratio:.2f}")
    (args.out / "result.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
