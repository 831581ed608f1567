"""End-of-sweep report: ranked configurations, the Pareto front, what was infeasible, stopped
early or failed, and why.

Built from the Optuna study alone (trial params, values and user attributes), so a report
of a study shared by several workers covers every worker's trials.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pandas as pd
from optuna.trial import TrialState

from revati.tune.plots import front_plot

# Throughput against tail latency: plotted for every sweep, whatever its objectives.
THROUGHPUT_LATENCY = (("output_throughput", True), ("p99_ttft_ms", False))
# Shown next to the objectives in the ranking when the trials have them.
KEY_METRICS = ("num_gpus", "output_throughput", "p99_ttft_ms", "mean_tpot_ms", "goodput_per_gpu",
               "cost_per_million_tokens", "runnable_per_core")
# Said under the ranking when a ranked trial's processes outnumbered the cores (metrics.py)
OVERSUBSCRIBED = ("runnable_per_core above 1: those trials' engine processes took turns on "
                  "this host's cores where the node runs them side by side, and the clock "
                  "rate can count their CPU-bound steps long (a synthetic TP 4 step read +21 % "
                  "on 2 cores: docs/limits.md, \"With more busy engine processes than "
                  "cores\"), so they may rank below where the node would put them")
TOP = 10


@dataclass
class Report:
    text: str
    plots: list[Path]
    counts: dict[str, int]


def _params(trial: optuna.trial.FrozenTrial) -> str:
    return " ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in trial.params.items())


def _ranked(study: optuna.Study, objectives: Any) -> pd.DataFrame:
    done = [t for t in study.trials if t.state == TrialState.COMPLETE]
    if not done:
        return pd.DataFrame()
    front = {t.number for t in study.best_trials}
    names = [o.metric for o in objectives]
    extra = [m for m in KEY_METRICS if m not in names]
    rows = [{"trial": t.number, "pareto": t.number in front, "config": _params(t),
             **dict(zip(names, t.values, strict=True)),
             **{f"{m} range": _range(t, m) for m in names},
             **{m: t.user_attrs.get("metrics", {}).get(m) for m in extra}} for t in done]
    df = pd.DataFrame(rows).dropna(axis="columns", how="all")
    first = objectives[0]
    return df.sort_values(["pareto", first.metric],
                          ascending=[False, first.direction == "minimize"]).head(TOP)


def _bounds(trial: optuna.trial.FrozenTrial, metric: str) -> tuple[float, float] | None:
    """A metric's lowest and highest over the trial's repeated loads (metrics.combine_repeats),
    or None for a trial of one load."""
    metrics = trial.user_attrs.get("metrics", {})
    low, high = metrics.get(f"{metric}_min"), metrics.get(f"{metric}_max")
    return None if low is None or high is None else (low, high)


def _range(trial: optuna.trial.FrozenTrial, metric: str) -> str | None:
    bounds = _bounds(trial, metric)
    return None if bounds is None else f"{bounds[0]:.4g}-{bounds[1]:.4g}"


def _within_first(study: optuna.Study, ranked: pd.DataFrame, metric: str) -> str | None:
    """Said under the ranking when repeated loads ran: which trials' ranges of the first
    objective overlap the first row's, so that the host's run-to-run spread does not
    separate them from it."""
    if len(ranked) < 2:
        return None
    trials = {t.number: t for t in study.trials}
    top, *others = (trials[int(n)] for n in ranked["trial"])
    first = _bounds(top, metric)
    if first is None:
        return None
    close = [t.number for t in others
             if (b := _bounds(t, metric)) and b[0] <= first[1] and first[0] <= b[1]]
    repeats = int(top.user_attrs["metrics"]["repeats"])
    if not close:
        return (f"Over {repeats} loads each, no other ranked trial's {metric} range overlaps "
                f"the first row's.")
    which = (f"range of trial {close[0]} overlaps" if len(close) == 1 else
             f"ranges of trials {', '.join(map(str, close))} overlap")
    return (f"Over {repeats} loads each, the {metric} {which} the first row's (trial "
            f"{top.number}): this host's run-to-run spread does not separate "
            f"{'it' if len(close) == 1 else 'them'} from that row (docs/tune.md, \"Repeated "
            f"loads\").")


# A failed trial without a reason: Optuna failed it when the sweep resumed, finding no
# heartbeat from the process that had run it (optuna.storages.fail_stale_trials).
NO_RESULT = "no result: the sweep ended while it ran (killed or interrupted)"


def _reason(trial: optuna.trial.FrozenTrial, attr: str,
            completed: dict[str, int]) -> str:
    reason = trial.user_attrs.get(attr, NO_RESULT if trial.state == TrialState.FAIL else "?")
    # a failure that a later trial of the same configuration made good (study.retry_failed)
    again = completed.get(_params(trial))
    return reason if again is None else f"(completed in trial {again}) {reason}"


def _reasons(study: optuna.Study, state: TrialState, attr: str) -> pd.DataFrame:
    completed = {_params(t): t.number for t in study.trials if t.state == TrialState.COMPLETE}
    # PRUNED holds both the infeasible and the stopped-early trials: each has its own attr
    rows = [{"trial": t.number, "config": _params(t), "reason": _reason(t, attr, completed)}
            for t in study.trials
            if t.state == state and (attr in t.user_attrs or state != TrialState.PRUNED)]
    return pd.DataFrame(rows)


# Short names for a plot's point labels; other parameters go by the last part of their key.
SHORT = {"tensor_parallel_size": "TP", "pipeline_parallel_size": "PP", "max_num_seqs": "seqs",
         "max_num_batched_tokens": "tokens", "request_rate": "rate",
         "enable_chunked_prefill": "chunked"}


def point_label(params: dict[str, Any]) -> str:
    """A trial's configuration in a few characters: "TP2 PP4", "seqs=64 tokens=8192"."""
    parts = []
    for key, value in params.items():
        name = key.rsplit(".", 1)[-1]
        short = SHORT.get(name, name)
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        parts.append(f"{short}{shown}" if short.isupper() else f"{short}={shown}")
    return " ".join(parts)


def _front(study: optuna.Study, names: tuple[str, str], maximize: tuple[bool, bool],
           path: Path) -> Path | None:
    points, labels = [], []
    for t in study.trials:
        metrics = t.user_attrs.get("metrics", {})
        if t.state == TrialState.COMPLETE and all(n in metrics for n in names):
            points.append([metrics[n] for n in names])
            labels.append(point_label(t.params))
    if not points:
        return None
    arr = np.asarray(points, dtype=float)
    return front_plot(arr[:, 0], arr[:, 1], labels, names, maximize, path)


def build_report(study: optuna.Study, objectives: Any, out_dir: Path) -> Report:
    counts = {s.name: sum(t.state == s for t in study.trials)
              for s in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)}
    lines = [f"# Study {study.study_name}",
             "trials: " + ", ".join(f"{n.lower()} {c}" for n, c in counts.items()), ""]
    ranked = _ranked(study, objectives)
    lines.append("## Best configurations")
    lines.append(ranked.to_string(index=False) if len(ranked) else "none: no trial completed")
    if spread := _within_first(study, ranked, objectives[0].metric):
        lines += ["", spread]
    if "runnable_per_core" in ranked and (ranked["runnable_per_core"] > 1).any():
        lines += ["", OVERSUBSCRIBED]
    for title, state, attr in (("Infeasible configurations (pruned before launch)",
                                TrialState.PRUNED, "infeasible_reason"),
                               ("Stopped early (the sweep's pruner: they could not win)",
                                TrialState.PRUNED, "stopped_early"),
                               ("Failed trials", TrialState.FAIL, "fail_reason")):
        table = _reasons(study, state, attr)
        lines += ["", f"## {title}", table.to_string(index=False) if len(table) else "none"]
    plots = []
    pairs = [(tuple(n for n, _ in THROUGHPUT_LATENCY), tuple(m for _, m in THROUGHPUT_LATENCY),
              "throughput_latency.png")]
    if len(objectives) == 2:
        pairs.append((tuple(o.metric for o in objectives),
                      tuple(o.direction == "maximize" for o in objectives), "pareto_front.png"))
    for names, maximize, filename in pairs:
        plot = _front(study, names, maximize, out_dir / filename)
        if plot:
            plots.append(plot)
        else:
            lines.append(f"\n(no {filename}: no completed trial has {names[0]} and {names[1]})")
    text = "\n".join(lines) + "\n"
    (out_dir / "report.md").write_text(text)
    return Report(text, plots, counts)
