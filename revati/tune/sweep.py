"""The Optuna driver: one study per sweep, one trial per configuration.

A trial applies the sampled values to the configuration, checks the space's constraints
(an infeasible configuration becomes a PRUNED trial with its reason and never launches),
runs the emulated benchmark through revati.tune.trial.run_trial (on the last trial's engine
when only the load differs), and records the result: COMPLETE with the objective values,
PRUNED when the sweep's pruner stopped it early (revati.tune.pruning), or FAIL with the
reason; the sweep goes on either way.
Every trial is also an MLflow child run of the sweep's parent run.
"""

from __future__ import annotations

import copy
import itertools
import json
import time
import warnings
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy.exc
from mlflow.exceptions import MlflowException
from omegaconf import DictConfig, OmegaConf
from optuna.trial import TrialState
from tqdm import tqdm

from revati.bench.options import BenchOptions
from revati.bench.server import EmulatedServer
from revati.tune.checks import check_config
from revati.tune.constraints import first_violation
from revati.tune.errors import ConfigError
from revati.tune.metrics import combine_repeats, objective_values, read_requests, trial_metrics
from revati.tune.plots import latency_cdf
from revati.tune.pruning import LoadReports, make_pruner
from revati.tune.report import KEY_METRICS, Report, build_report, point_label
from revati.tune.space import SearchSpace, load_space, sampler_kind, with_params
from revati.tune.tracking import SweepTracker, flat_params
from revati.tune.trial import SharedEngine, TrialError, bench_options, engine_key, run_trial
from revati.tune.walltime import estimate_wall_s, minutes

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)


def make_sampler(cfg: Any, space: SearchSpace, seed: int) -> optuna.samplers.BaseSampler:
    kind = sampler_kind(cfg.sweep, space)
    if kind == "grid":
        # The grid's order is shuffled by its seed and a trial's grid point is an index into
        # that order: every worker of a study and every resumed run must shuffle alike, so
        # the grid takes the sweep's seed, never the fresh one a resumed study gets.
        return optuna.samplers.GridSampler(space.grid(), seed=cfg.seed)
    return {"tpe": optuna.samplers.TPESampler, "nsga2": optuna.samplers.NSGAIISampler,
            "random": optuna.samplers.RandomSampler}[kind](seed=seed)


def trial_budget(cfg: Any, space: SearchSpace) -> int:
    """The study's total number of trials (check_config() made sure it is defined)."""
    return cfg.sweep.n_trials if cfg.sweep.n_trials is not None else space.grid_size()


def _in_folder(cfg: DictConfig, out_dir: Path) -> DictConfig:
    """A copy of cfg whose load writes its results to out_dir (trial.out_dir)."""
    cfg = copy.deepcopy(cfg)
    OmegaConf.update(cfg, "trial.out_dir", str(out_dir), force_add=True)
    return cfg


class Objective:
    def __init__(self, cfg: DictConfig, space: SearchSpace, tracker: SweepTracker,
                 engines: SharedEngine, pruning: bool):
        self.cfg, self.space, self.tracker, self.engines = cfg, space, tracker, engines
        self.pruning = pruning

    def __call__(self, trial: optuna.Trial) -> list[float]:
        params = self.space.suggest(trial)
        cfg = with_params(self.cfg, params)
        out_dir = Path(cfg.trial.workdir) / f"trial-{trial.number:04d}"
        OmegaConf.update(cfg, "trial.out_dir", str(out_dir), force_add=True)
        out_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(cfg, out_dir / "config.yaml")
        record = dict(number=trial.number, params=flat_params(cfg))
        reason = first_violation(cfg, self.space.constraints)
        if reason:
            trial.set_user_attr("infeasible_reason", reason)
            self.tracker.log_trial(state="PRUNED", metrics={}, reason=reason,
                                   artifacts=[out_dir / "config.yaml"], **record)
            raise optuna.TrialPruned(reason)
        watch = None
        if self.pruning:
            def watch(server: EmulatedServer) -> LoadReports:
                return LoadReports(trial, cfg, server.port, server.dep.virtual_s)
        try:
            runs, requests = [], None
            for n in range(cfg.trial.repeats):
                # the first load in the trial's folder, the others in repeat-N/ within it;
                # the pruner watches the first (a trial it stops runs no more)
                load_cfg = cfg if n == 0 else _in_folder(cfg, out_dir / f"repeat-{n + 1}")
                summary = run_trial(load_cfg, self.engines, None if n else watch)
                load_requests = read_requests(Path(load_cfg.trial.out_dir))
                runs.append(trial_metrics(load_cfg, summary, load_requests))
                if n == 0:
                    requests = load_requests  # the latency CDF's
            spread = [o.metric for o in cfg.sweep.objectives] + list(KEY_METRICS)
            metrics = combine_repeats(runs, spread)
            values = objective_values(metrics, cfg.sweep.objectives)
        except optuna.TrialPruned as exc:
            trial.set_user_attr("stopped_early", str(exc))
            self.tracker.log_trial(state="PRUNED", metrics={}, reason=str(exc),
                                   artifacts=self._artifacts(out_dir), **record)
            raise
        except TrialError as exc:
            trial.set_user_attr("fail_reason", str(exc))
            self.tracker.log_trial(state="FAIL", metrics={}, reason=str(exc),
                                   artifacts=self._artifacts(out_dir), **record)
            raise
        trial.set_user_attr("metrics", metrics)
        plot = None if requests is None else latency_cdf(requests, out_dir / "latency_cdf.png")
        self.tracker.log_trial(state="COMPLETE", metrics=metrics, reason=None,
                               artifacts=self._artifacts(out_dir) + ([plot] if plot else []),
                               **record)
        return values

    @staticmethod
    def _artifacts(out_dir: Path) -> list[Path]:
        names = ("config.yaml", "command.txt", "summary.json", "requests.csv")
        logs = sorted(out_dir.glob("*.log"))  # bench.log and any engine log bench leaves
        return [out_dir / n for n in names] + logs


def _engine_of(cfg: DictConfig) -> BenchOptions:
    return engine_key(bench_options(cfg, Path("."))[0])


def _load_only(cfg: DictConfig, space: SearchSpace) -> bool:
    """Whether no parameter of the space changes the engine (a sweep over the load alone,
    whose trials all run on one engine when trial.share_engine is on)."""
    for p in space.params:
        ends = (p.choices[0], p.choices[-1]) if p.choices is not None else (p.low, p.high)
        first, last = (_engine_of(with_params(cfg, {p.key: v})) for v in ends)
        if first != last:
            return False
    return True


def plan(cfg: DictConfig, space: SearchSpace, budget: int,
         done: set[str]) -> dict[str, float]:
    """Print each trial's estimated wall time on this host and the total before the sweep
    starts (revati/tune/walltime.py); return the estimates by point label (grid spaces: every
    point a constraint lets through and no finished trial (`done`) ran; others: the base
    configuration's, once per trial). Where every trial runs on the same engine (a sweep over
    the load alone, trial.share_engine on), only the first pays the engine's start-up."""
    cores = cfg.parallelism.host_cores
    shared = bool(cfg.trial.share_engine) and _load_only(cfg, space)
    grid = space.grid() if sampler_kind(cfg.sweep, space) == "grid" else None
    if grid is None:
        each = estimate_wall_s(cfg, started=shared)
        total = each * budget + (estimate_wall_s(cfg) - each)
        one_engine = " on one engine, started once" if shared else ""
        print(f"[revati-tune] {budget} trials of ~{minutes(each)} each{one_engine} on "
              f"{cores} cores (estimated for the base configuration): ~{minutes(total)}",
              flush=True)
        return {"": each}
    estimates: dict[str, float] = {}
    lines = []
    for values in itertools.product(*grid.values()):
        params = dict(zip(grid, values, strict=True))
        trial_cfg = with_params(cfg, params)
        label = point_label(params)
        # a skipped point's trial is finished too (pruned before launch): it says why
        if reason := first_violation(trial_cfg, space.constraints):
            lines.append(f"  {label}: skipped: {reason}")
        elif label in done:
            lines.append(f"  {label}: done")
        else:
            estimates[label] = estimate_wall_s(trial_cfg, started=shared and bool(estimates))
            lines.append(f"  {label}: ~{minutes(estimates[label])}")
    one_engine = ", one engine started once" if shared and estimates else ""
    print(f"[revati-tune] {len(estimates)} of {len(lines)} configurations to run, estimated "
          f"~{minutes(sum(estimates.values()))} of wall time on {cores} cores{one_engine}:",
          flush=True)
    print("\n".join(lines), flush=True)
    return estimates


class Progress:
    """A tqdm bar of finished trials with failure counts, the best value so far and the
    estimated wall time left (plan())."""

    def __init__(self, study: optuna.Study, total: int, enabled: bool,
                 estimates: dict[str, float]):
        self.bar = tqdm(total=total, desc=study.study_name[:40], unit="trial", disable=not enabled)
        self.estimates = dict(estimates)
        self.each = estimates.get("")  # not a grid: one estimate for every trial
        self.left_s = self.each * total if self.each is not None else sum(estimates.values())
        self.bar.set_postfix({"left": f"~{minutes(self.left_s)}"})

    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        trials = study.get_trials(deepcopy=False, states=FINISHED)
        counts = {s: sum(t.state == s for t in trials) for s in FINISHED}
        done = self.each if self.each is not None else self.estimates.pop(
            point_label(trial.params), 0.0)
        self.left_s = max(0.0, self.left_s - done)
        postfix = {"ok": counts[TrialState.COMPLETE], "pruned": counts[TrialState.PRUNED],
                   "failed": counts[TrialState.FAIL], "left": f"~{minutes(self.left_s)}"}
        if counts[TrialState.COMPLETE]:
            if len(study.directions) == 1:
                postfix["best"] = f"{study.best_value:.4g}"
            else:
                postfix["pareto"] = len(study.best_trials)
        self.bar.set_postfix(postfix)
        self.bar.update(1)


def _storage(url: str, attempts: int = 5) -> optuna.storages.BaseStorage:
    # Heartbeats let a later run (or another worker) fail the trials of a dead process.
    # SQLite lets one writer in at a time: workers of one host that share a study file wait
    # for each other up to a minute rather than the driver's 5 s
    kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}

    def open_storage() -> optuna.storages.RDBStorage:
        return optuna.storages.RDBStorage(url, engine_kwargs=kwargs, heartbeat_interval=30,
                                          grace_period=120)

    for attempt in range(attempts - 1):
        try:
            return open_storage()
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError,
                sqlalchemy.exc.OperationalError):
            # Workers started together on an empty database race to create Optuna's
            # schema (SQLite: "table studies already exists"); the loser finds it complete
            # on the next attempt.
            time.sleep(0.5 * (attempt + 1))
    return open_storage()


def _failed_points(study: optuna.Study) -> dict[str, dict[str, Any]]:
    """The configurations whose trials all failed (an engine that crashed or was killed, a
    host out of memory), by label, to run once more (`study.retry_failed`)."""
    trials = study.get_trials(deepcopy=False)
    ran = {point_label(t.params) for t in trials if t.state != TrialState.FAIL}
    return {point_label(t.params): t.params for t in trials
            if t.state == TrialState.FAIL and point_label(t.params) not in ran}


def run_sweep(cfg: DictConfig) -> tuple[optuna.Study, Report]:
    """Validate, then run (or resume) the sweep's study; return it with its report."""
    space = load_space(cfg.sweep)
    check_config(cfg, space)
    # Optuna logs every failed trial with a traceback; the progress bar and the report
    # carry the reasons instead.
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    # Heartbeats (and failing stale trials) are "experimental" in Optuna, stable in use.
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    out_dir = Path(cfg.study.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        storage = _storage(cfg.study.storage)
    except (ImportError, sqlalchemy.exc.SQLAlchemyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"cannot open study.storage '{cfg.study.storage}': {first}") from None
    try:
        tracker = SweepTracker(cfg.mlflow.tracking_uri, cfg.mlflow.experiment,
                               cfg.mlflow.artifact_root, cfg.study.name)
    except (MlflowException, sqlalchemy.exc.SQLAlchemyError) as exc:
        raise ConfigError(f"cannot open mlflow.tracking_uri '{cfg.mlflow.tracking_uri}': "
                          f"{' '.join(str(exc).split())[:300]}") from None
    directions = [o.direction for o in cfg.sweep.objectives]
    existing = 0
    if cfg.study.name in {s.study_name for s in storage.get_all_studies()}:
        existing = len(optuna.load_study(study_name=cfg.study.name, storage=storage).trials)
    # A resumed study gets a fresh seed: the same seed would replay the first proposals.
    sampler = make_sampler(cfg, space, seed=cfg.seed + existing)
    budget = trial_budget(cfg, space)
    pruner = make_pruner(cfg.sweep)
    study = optuna.create_study(study_name=cfg.study.name, storage=storage, sampler=sampler,
                                pruner=pruner, directions=directions, load_if_exists=True)
    optuna.storages.fail_stale_trials(study)
    tracker.log_sweep(flat_params(cfg))
    retry = _failed_points(study) if cfg.study.retry_failed else {}
    finished = study.get_trials(deepcopy=False, states=FINISHED)
    if isinstance(sampler, optuna.samplers.GridSampler) and cfg.sweep.n_trials is None:
        # Every grid point once: the GridSampler stops the study when each point has a
        # finished trial. A trial budget would not do: workers sharing the study can draw
        # the same point at once, and their duplicates would use up the budget before
        # every point had run.
        # (a retried configuration's trial has no grid point: study.retry_failed)
        fresh = budget - len({t.system_attrs["grid_id"] for t in finished
                              if "grid_id" in t.system_attrs})
        n_trials, stop = None, []
    else:
        fresh = budget - len(finished)
        # MaxTrialsCallback stops this worker once the study (all workers) reaches the budget.
        n_trials, stop = fresh, [optuna.study.MaxTrialsCallback(budget, states=FINISHED)]
    remaining = max(fresh, 0) + len(retry)
    if remaining > 0:
        done = {point_label(t.params) for t in finished} - set(retry)
        progress = Progress(study, remaining, cfg.study.show_progress,
                            plan(cfg, space, remaining, done))
        with SharedEngine(cfg.trial.share_engine) as engines:
            pruning = not isinstance(pruner, optuna.pruners.NopPruner)
            objective = Objective(cfg, space, tracker, engines, pruning)
            if fresh > 0:
                study.optimize(objective, n_trials=n_trials, catch=(TrialError,),
                               callbacks=[*stop, progress])
            # Retries run one at a time, after the fresh points: an enqueued trial takes no
            # grid point, and the GridSampler stops the study after any trial once every
            # point has one.
            for params in retry.values():
                study.enqueue_trial(params)
                study.optimize(objective, n_trials=1, catch=(TrialError,), callbacks=[progress])
        progress.bar.close()
    report = build_report(study, cfg.sweep.objectives, out_dir)
    (out_dir / "best.json").write_text(json.dumps(
        [{"trial": t.number, "params": t.params, "values": t.values}
         for t in study.best_trials], indent=2) + "\n")
    tracker.finish(
        metrics={f"trials_{k.lower()}": float(v) for k, v in report.counts.items()},
        artifacts=[out_dir / "report.md", out_dir / "best.json", *report.plots])
    return study, report
