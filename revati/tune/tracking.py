"""MLflow logging: one parent run per sweep (study), one child run per trial.

The parent run is found again by its study tag, so re-running a sweep (which resumes its
Optuna study) adds its new trials under the same parent run.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient
from mlflow.utils.time import get_current_time_millis
from omegaconf import OmegaConf

STUDY_TAG = "revati.study"
PARENT_TAG = "mlflow.parentRunId"
# MLflow rejects batches of more than 100 params and values longer than 6000 characters.
_BATCH = 100
_MAX_VALUE = 6000


def flat_params(cfg: Any) -> dict[str, str]:
    """Every resolved config value as a dotted key (lists and nulls as their YAML text)."""
    out: dict[str, str] = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(f"{prefix}.{key}" if prefix else str(key), value)
        else:
            out[prefix] = str(node)[:_MAX_VALUE]

    container = OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else cfg
    walk("", container)
    return out


def _chunks(items: list, size: int) -> Iterator[list]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


@contextlib.contextmanager
def _one_at_a_time(tracking_uri: str) -> Iterator[None]:
    """Workers of one host that start together (a launcher's jobs) would race to create a
    new SQLite store's tables, the experiment and the sweep's parent run: they take turns."""
    if not tracking_uri.startswith("sqlite:///"):
        yield
        return
    lock = Path(tracking_uri.removeprefix("sqlite:///")).with_suffix(".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


class SweepTracker:
    def __init__(self, tracking_uri: str, experiment: str, artifact_root: str, study: str):
        with _one_at_a_time(tracking_uri):
            self._open(tracking_uri, experiment, artifact_root, study)

    def _open(self, tracking_uri: str, experiment: str, artifact_root: str, study: str) -> None:
        self.client = MlflowClient(tracking_uri=tracking_uri)
        exp = self.client.get_experiment_by_name(experiment)
        self.experiment_id = (exp.experiment_id if exp else self.client.create_experiment(
            experiment, artifact_location=Path(artifact_root).resolve().as_uri()))
        found = self.client.search_runs(
            [self.experiment_id], filter_string=f"tags.`{STUDY_TAG}` = '{study}'",
            max_results=1, order_by=["attributes.start_time ASC"])
        if found:
            self.parent_id = found[0].info.run_id
            self.client.update_run(self.parent_id, status="RUNNING")
        else:
            self.parent_id = self.client.create_run(
                self.experiment_id, run_name=study, tags={STUDY_TAG: study}).info.run_id

    def _log(self, run_id: str, params: dict[str, str] | None = None,
             metrics: dict[str, float] | None = None, tags: dict[str, str] | None = None,
             artifacts: Iterable[Path] = ()) -> None:
        now = get_current_time_millis()
        for chunk in _chunks([Param(k, v) for k, v in (params or {}).items()], _BATCH):
            self.client.log_batch(run_id, params=chunk)
        for chunk in _chunks([Metric(k, v, now, 0) for k, v in (metrics or {}).items()], _BATCH):
            self.client.log_batch(run_id, metrics=chunk)
        if tags:
            self.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])
        for path in artifacts:
            if path.is_file():
                self.client.log_artifact(run_id, str(path))

    def log_sweep(self, params: dict[str, str]) -> None:
        # Params of a run are write-once; a resumed sweep logs the same ones again.
        existing = self.client.get_run(self.parent_id).data.params
        self._log(self.parent_id, params={k: v for k, v in params.items() if k not in existing})

    def log_trial(self, number: int, state: str, params: dict[str, str],
                  metrics: dict[str, float], reason: str | None, artifacts: Iterable[Path]) -> str:
        tags = {PARENT_TAG: self.parent_id, "revati.trial": str(number), "revati.state": state}
        if reason:
            tags["revati.reason"] = reason[:_MAX_VALUE]
        run_id = self.client.create_run(self.experiment_id, run_name=f"trial-{number}",
                                        tags=tags).info.run_id
        self._log(run_id, params=params, metrics=metrics, artifacts=artifacts)
        status = {"COMPLETE": "FINISHED", "PRUNED": "KILLED"}.get(state, "FAILED")
        self.client.set_terminated(run_id, status=status)
        return run_id

    def finish(self, metrics: dict[str, float], artifacts: Iterable[Path]) -> None:
        self._log(self.parent_id, metrics=metrics, artifacts=artifacts)
        self.client.set_terminated(self.parent_id, status="FINISHED")
