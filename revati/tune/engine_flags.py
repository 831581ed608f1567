"""Engine command-line flags for a configuration, from the engine's `flags` mapping."""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from revati.tune.errors import ConfigError


def _value(cfg: Any, key: str) -> Any:
    missing = object()
    value = OmegaConf.select(cfg, key, default=missing)
    if value is missing:
        raise ConfigError(f"engine {cfg.engine.name}: flag mapping names unknown key '{key}'")
    return value


def engine_flags(cfg: Any) -> list[str]:
    """Flags for every mapped key whose value is set (null keeps the engine default)."""
    args: list[str] = []
    for key, spec in cfg.engine.flags.items():
        value = _value(cfg, key)
        if value is None:
            continue
        if isinstance(value, bool):
            flag = spec.get("if_true" if value else "if_false")
            if flag:
                args.append(flag)
        else:
            args += [spec.flag, str(value)]
    return args + [str(a) for a in cfg.engine.extra_args]


def unmapped_keys(cfg: Any, keys: set[str]) -> list[str]:
    """Keys among `keys` that reach the engine only through a flag but have none mapped."""
    engine_keys = [k for k in keys if k.startswith(("engine.", "scheduler."))]
    return sorted(k for k in engine_keys if k not in cfg.engine.flags)


def engine_release(cfg: Any) -> str:
    """`revati bench --engine`'s value: the engine, and ==engine.version when one is set."""
    version = cfg.engine.get("version")
    return cfg.engine.name + (f"=={version}" if version else "")
