"""Checks of revati-tune's input that run before any trial starts.

Each failure is a ConfigError whose one-line message names the bad value: a malformed
override, an unknown config-group option or model, a value of the wrong kind, a search
space that names unknown keys, or a fixed setting that makes every trial infeasible.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from revati import CONF_DIR
from revati.engines import versions
from revati.models.catalog import UnknownModelError, list_models, resolve_name
from revati.tune.constraints import check_fixed
from revati.tune.engine_flags import engine_release, unmapped_keys
from revati.tune.errors import ConfigError
from revati.tune.metrics import is_known_metric
from revati.tune.pruning import make_pruner
from revati.tune.space import SearchSpace, sampler_kind, with_params
from revati.workload.datasets import DATASETS, DatasetError, load_trace

GROUPS = ("model", "hardware", "engine", "parallelism", "scheduler", "workload", "sweep")
SAMPLERS = ("auto", "grid", "tpe", "nsga2", "random")
_HW_KEYS = ("memory_bytes", "context_reserved_bytes", "price_per_gpu_hour_usd")


def _check_choice(group: str, value: str) -> None:
    if group == "model":
        try:
            resolve_name(value)
        except UnknownModelError as exc:
            raise ConfigError(str(exc)) from None
        return
    options = sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
    if value not in options:
        raise ConfigError(f"unknown {group} '{value}' (known: {', '.join(options)})")


def _one_line(exc: Exception) -> str:
    """Hydra's multi-line messages as one line, without the pointer to its grammar docs."""
    lines = [ln.strip() for ln in str(exc).splitlines()
             if ln.strip() and not ln.startswith(("See https://", "Error parsing override"))]
    return " ".join(lines) or type(exc).__name__


def check_overrides(args: list[str]) -> None:
    """Parse command-line overrides, check config-group choices (model names included) and,
    for a single run, that the overrides compose into a config."""
    sweeping = False
    for arg in args:
        try:
            [override] = OverridesParser.create().parse_overrides([arg])
        except HydraException as exc:
            raise ConfigError(f"malformed override '{arg}': {_one_line(exc)}") from None
        sweeping |= override.is_sweep_override()
        if override.key_or_group in GROUPS and not override.is_delete():
            values = (list(override.sweep_string_iterator()) if override.is_sweep_override()
                      else [override.value()])
            for value in values:
                _check_choice(override.key_or_group, str(value))
    if sweeping:  # Hydra composes each multirun job itself
        return
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(config_name="config", overrides=args, return_hydra_config=True)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(_one_line(exc)) from None
    _check_writable("hydra.run.dir", OmegaConf.to_container(cfg.hydra.run)["dir"])


def _check_writable(key: str, template: str) -> None:
    """The output folder can be made: a folder can be made (and is removed at once) in its
    nearest existing ancestor. Only the literal part before the first interpolation is
    known before Hydra runs."""
    path = Path(template.split("$", 1)[0] or ".").absolute()
    while not path.exists():
        path = path.parent
    try:
        tempfile.TemporaryDirectory(dir=path).cleanup()
    except OSError as e:
        raise ConfigError(f"{key}={template}: cannot write under {path} ({e.strerror})") from None


def _positive(cfg: Any, key: str, kind: type | tuple[type, ...], allow_inf: bool = False) -> None:
    value = OmegaConf.select(cfg, key)
    ok = isinstance(value, kind) and not isinstance(value, bool) and value > 0
    if not ok and not (allow_inf and value == float("inf")):
        raise ConfigError(f"{key}={value!r} must be a positive "
                          f"{'integer' if kind is int else 'number'}")


def check_config(cfg: Any, space: SearchSpace) -> None:
    """Check a composed configuration and its search space; raise ConfigError on the first
    problem."""
    if "model" not in cfg:
        raise ConfigError("no model chosen: add model=NAME "
                          f"(known: {', '.join(list_models(aliases=True))})")
    for key in _HW_KEYS:
        if not isinstance(OmegaConf.select(cfg, f"hardware.{key}"), int | float):
            raise ConfigError(f"hardware '{cfg.hardware_key}' has no numeric {key}")
    for key in ("parallelism.tensor_parallel_size", "parallelism.pipeline_parallel_size",
                "parallelism.max_gpus", "workload.num_prompts", "engine.max_model_len"):
        _positive(cfg, key, int)
    if cfg.workload.dataset not in DATASETS:
        raise ConfigError(f"unknown workload.dataset '{cfg.workload.dataset}' "
                          f"(known: {', '.join(DATASETS)})")
    if cfg.workload.dataset == "random":
        for key in ("workload.input_len", "workload.output_len"):
            _positive(cfg, key, int)
    if cfg.workload.dataset == "trace":
        try:
            load_trace(str(cfg.workload.get("trace")))  # read in full: a bad row fails here
        except DatasetError as e:
            raise ConfigError(f"workload.trace: {e}") from None
    _positive(cfg, "workload.burstiness", (int, float), allow_inf=True)
    warmups = cfg.workload.get("num_warmups", 0)
    if not isinstance(warmups, int) or isinstance(warmups, bool) or warmups < 0:
        raise ConfigError(f"workload.num_warmups={warmups!r} must be a count (0 or more)")
    for key in ("scheduler.max_num_seqs", "scheduler.max_num_batched_tokens"):
        if OmegaConf.select(cfg, key) is not None:
            _positive(cfg, key, int)
    _positive(cfg, "workload.request_rate", (int, float), allow_inf=True)
    _positive(cfg, "trial.repeats", int)
    if cfg.trial.get("max_wall_min") is not None:
        _positive(cfg, "trial.max_wall_min", (int, float))
    make_pruner(cfg.sweep)  # raises on a pruner that cannot work for this sweep
    if not isinstance(cfg.trial.share_engine, bool):
        raise ConfigError(f"trial.share_engine={cfg.trial.share_engine!r} must be true or false")
    try:
        versions.check(engine_release(cfg))
    except versions.EngineVersionError as e:
        raise ConfigError(f"engine.version={cfg.engine.get('version')}: {e}") from None
    _positive(cfg, "engine.gpu_memory_utilization", (int, float))
    if cfg.engine.gpu_memory_utilization > 1:
        raise ConfigError(f"engine.gpu_memory_utilization={cfg.engine.gpu_memory_utilization} "
                          "must be at most 1")
    if cfg.sweep.sampler not in SAMPLERS:
        raise ConfigError(f"unknown sweep.sampler '{cfg.sweep.sampler}' "
                          f"(known: {', '.join(SAMPLERS)})")
    kind = sampler_kind(cfg.sweep, space)
    if cfg.sweep.n_trials is None and kind != "grid":
        raise ConfigError(f"sweep.n_trials is required with sampler '{kind}' "
                          f"on search space '{space.name}'")
    if cfg.sweep.n_trials is not None:
        _positive(cfg, "sweep.n_trials", int)
    if not cfg.sweep.objectives:
        raise ConfigError("sweep.objectives is empty")
    for obj in cfg.sweep.objectives:
        if not is_known_metric(obj.metric):
            raise ConfigError(f"unknown objective metric '{obj.metric}'")
        if obj.direction not in ("maximize", "minimize"):
            raise ConfigError(f"objective {obj.metric}: direction '{obj.direction}' "
                              "must be maximize or minimize")
    missing = object()
    for key in sorted(space.keys):
        if OmegaConf.select(cfg, key, default=missing) is missing:
            raise ConfigError(f"search space '{space.name}' sweeps unknown key '{key}'")
    engines = [p.choices for p in space.params if p.key == "engine"]
    for engine_cfg in ([with_params(cfg, {"engine": e}) for e in engines[0]] if engines
                       else [cfg]):
        unmapped = unmapped_keys(engine_cfg, space.keys)
        if unmapped:
            raise ConfigError(f"search space '{space.name}' sweeps '{unmapped[0]}', which "
                              f"engine '{engine_cfg.engine.name}' has no flag for")
    check_fixed(cfg, space.constraints, space.keys)
