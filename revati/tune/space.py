"""Optuna search spaces: the `params` and `constraints` of a sweep (revati/conf/sweep/).

A sweep file holds its settings (sampler, objectives, budget) and its search space
together: dotted config keys, each with a parameter spec, and the constraints every
sampled configuration must meet:

    params:
      parallelism.tensor_parallel_size: {choices: [1, 2, 4, 8]}     # categorical
      scheduler.max_num_batched_tokens: {low: 1024, high: 32768, step: 1024}  # integer
      workload.request_rate: {low: 0.5, high: 64.0, log: true}      # float
    constraints: [gpu_budget, fits_in_memory]
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from omegaconf import DictConfig, OmegaConf

from revati import CONF_DIR
from revati.tune.errors import ConfigError

SWEEP_DIR = CONF_DIR / "sweep"
# Config groups a search space may choose (a parameter named after the group, its choices
# the group's options): the engine itself, so one study compares vLLM with SGLang.
GROUP_PARAMS = ("engine",)
# An engine's own part of its group: the rest (max_model_len, dtype, ...) means the same
# for every engine and keeps the sweep's value when the engine changes.
ENGINE_OWN = ("name", "flags", "extra_args")


@dataclass(frozen=True)
class Param:
    key: str
    choices: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False

    def suggest(self, trial: optuna.Trial) -> Any:
        if self.choices is not None:
            return trial.suggest_categorical(self.key, list(self.choices))
        if isinstance(self.low, int) and isinstance(self.high, int):
            return trial.suggest_int(self.key, self.low, self.high, step=self.step or 1,
                                     log=self.log)
        return trial.suggest_float(self.key, self.low, self.high, step=self.step, log=self.log)

    def grid_values(self) -> list[Any] | None:
        """Every value the parameter can take, or None when it is continuous."""
        if self.choices is not None:
            return list(self.choices)
        if isinstance(self.low, int) and isinstance(self.high, int):
            return list(range(self.low, self.high + 1, self.step or 1))
        return None


@dataclass(frozen=True)
class SearchSpace:
    name: str
    params: tuple[Param, ...]
    constraints: tuple[str, ...]

    @property
    def keys(self) -> set[str]:
        return {p.key for p in self.params}

    def suggest(self, trial: optuna.Trial) -> dict[str, Any]:
        return {p.key: p.suggest(trial) for p in self.params}

    def grid(self) -> dict[str, list[Any]] | None:
        values = {p.key: p.grid_values() for p in self.params}
        return None if any(v is None for v in values.values()) else values

    def grid_size(self) -> int | None:
        grid = self.grid()
        return None if grid is None else math.prod(len(v) for v in grid.values())


def sampler_kind(sweep: Any, space: SearchSpace) -> str:
    """The sampler a sweep uses: "auto" is a grid when the space has one of at most
    sweep.grid_max points, else NSGA-II for several objectives and TPE for one."""
    kind, size = sweep.sampler, space.grid_size()
    if kind == "auto":
        if size is not None and size <= sweep.grid_max:
            return "grid"
        return "nsga2" if len(sweep.objectives) > 1 else "tpe"
    if kind == "grid" and size is None:
        raise ConfigError(f"search space '{space.name}' has continuous parameters: "
                          "no grid (use sweep.sampler=tpe, nsga2 or random)")
    return kind


def _param(space: str, key: str, spec: Any) -> Param:
    if not isinstance(spec, dict):
        raise ConfigError(f"search space '{space}': parameter '{key}' must be a mapping")
    unknown = set(spec) - {"choices", "low", "high", "step", "log"}
    if unknown:
        raise ConfigError(f"search space '{space}': parameter '{key}' has unknown field(s) "
                          f"{', '.join(sorted(unknown))}")
    if "choices" in spec:
        if not spec["choices"]:
            raise ConfigError(f"search space '{space}': parameter '{key}' has no choices")
        if key in GROUP_PARAMS:
            unknown = [c for c in spec["choices"] if not (CONF_DIR / key / f"{c}.yaml").is_file()]
            if unknown:
                known = ", ".join(sorted(p.stem for p in (CONF_DIR / key).glob("*.yaml")))
                raise ConfigError(f"search space '{space}': unknown {key} '{unknown[0]}' "
                                  f"(known: {known})")
        return Param(key, choices=tuple(spec["choices"]))
    low, high = spec.get("low"), spec.get("high")
    if not isinstance(low, int | float) or not isinstance(high, int | float) or low > high:
        raise ConfigError(f"search space '{space}': parameter '{key}' needs choices or "
                          f"numeric low <= high (got low={low}, high={high})")
    return Param(key, low=low, high=high, step=spec.get("step"), log=bool(spec.get("log")))


def space_of(name: str, sweep: Mapping[str, Any]) -> SearchSpace:
    """The search space of a sweep's settings (a mapping with params and constraints)."""
    data = (OmegaConf.to_container(sweep, resolve=True) if OmegaConf.is_config(sweep)
            else dict(sweep))
    params = data.get("params") or {}
    if not params:
        raise ConfigError(f"search space '{name}' has no params")
    if not isinstance(params, dict):
        raise ConfigError(f"search space '{name}': params must be a mapping of config keys")
    return SearchSpace(
        name=name,
        params=tuple(_param(name, k, v) for k, v in params.items()),
        constraints=tuple(data.get("constraints") or ()),
    )


def load_space(sweep: str | Mapping[str, Any]) -> SearchSpace:
    """The search space of a sweep: the composed cfg.sweep, or a sweep by name
    (revati/conf/sweep/<name>.yaml), or `sweep` itself when it is a path to a .yaml file."""
    if not isinstance(sweep, str):
        return space_of(str(sweep.get("name") or "sweep"), sweep)
    path = Path(sweep) if sweep.endswith(".yaml") else SWEEP_DIR / f"{sweep}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in SWEEP_DIR.glob("*.yaml")))
        raise ConfigError(f"unknown search space '{sweep}' (known: {known})")
    return space_of(path.stem, OmegaConf.load(path))


def with_params(cfg: DictConfig, params: dict[str, Any]) -> DictConfig:
    """The configuration of a trial: cfg with the sampled values set, a chosen config group
    (GROUP_PARAMS) replaced by its option's file with the shared settings kept."""
    trial_cfg = copy.deepcopy(cfg)
    for key, value in params.items():
        if key in GROUP_PARAMS:
            option = OmegaConf.load(CONF_DIR / key / f"{value}.yaml")
            shared = {k: v for k, v in trial_cfg[key].items() if k not in ENGINE_OWN}
            value = OmegaConf.merge(option, shared)
        OmegaConf.update(trial_cfg, key, value, merge=False)
    return trial_cfg
