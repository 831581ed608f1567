"""`revati-tune`: the Hydra application over revati/conf/ that runs one Optuna sweep.

    revati-tune                                   # llama3_8b on H200, sweep=tp_pp
    revati-tune +model=llama70b sweep=tp_pp
    revati-tune model=qwen7b sweep=rate_capacity hardware=h100_sxm workload.num_prompts=200
    revati-tune -m model=llama8b,qwen7b sweep=batching      # one sweep per model

Invalid input (malformed override, unknown model or option, impossible fixed setting)
stops the program before any trial with one line on stderr and exit status 2.
"""

from __future__ import annotations

import hashlib
import re
import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from revati import CONF_DIR
from revati.cli.main import exit_on_sigterm
from revati.timewarp.timekeeper import host_cores
from revati.tune.errors import ConfigError

_UNSAFE = re.compile(r"[^A-Za-z0-9_.,=+-]")
_WORD = re.compile(r"[A-Za-z0-9_]+")
_MAX_ID = 120


def study_id(override_dirname: str) -> str:
    """A folder- and study-name for a command line's overrides (Hydra's override_dirname,
    which is sorted, so the same overrides in any order name the same study)."""
    name = _UNSAFE.sub("_", override_dirname) or "default"
    if len(name) > _MAX_ID:
        digest = hashlib.sha1(override_dirname.encode()).hexdigest()[:12]
        name = f"{name[:_MAX_ID - 13]}-{digest}"
    return name


def register_resolvers() -> None:
    """The interpolations revati/conf/ uses beyond OmegaConf's own."""
    OmegaConf.register_new_resolver("study_id", study_id, replace=True)
    OmegaConf.register_new_resolver("usable_cores", host_cores, replace=True)


def _fail(exc: Exception) -> None:
    print(f"revati-tune: error: {exc}", file=sys.stderr)
    sys.exit(2)


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def tune(cfg: DictConfig) -> None:
    from revati.tune.sweep import run_sweep  # heavy imports only once the input parsed

    try:
        OmegaConf.resolve(cfg)
        _, report = run_sweep(cfg)
    except ConfigError as exc:
        _fail(exc)
    print(report.text)
    print(f"output: {cfg.study.output_dir}")


def _overrides(argv: list[str]) -> list[str] | None:
    """The override arguments, or None when Hydra flags other than --multirun are present
    (--help, --cfg, --config-dir, ...: those are Hydra's to handle)."""
    overrides = []
    for arg in argv:
        if arg in ("-m", "--multirun"):
            continue
        if arg.startswith("-"):
            return None
        overrides.append(arg)
    return overrides


def select_not_append(argv: list[str]) -> list[str]:
    """`+group=option` as `group=option` for the config groups of the defaults list.

    Hydra refuses to append a group that the defaults list already has, but
    `+model=NAME` is how model selection is spelled (the model group has a default so
    that a bare `revati-tune` runs); both spellings select, and name the same study."""
    from revati.tune.checks import GROUPS

    return [a[1:] if a.startswith("+") and a[1:].split("=", 1)[0] in GROUPS else a
            for a in argv]


def canonical_models(argv: list[str]) -> list[str]:
    """`model=ALIAS` as `model=NAME`, the catalog name the alias stands for.

    A model's aliases are a key of its catalog file (revati.models.catalog.alias_table), not
    Hydra options: every model name of a model override (each of a multirun's list too) is
    rewritten before Hydra reads it, so an alias and its catalog name name the same study."""
    from revati.models.catalog import alias_table

    table = alias_table()
    out = []
    for arg in argv:
        key, eq, value = arg.partition("=")
        if eq and key.lstrip("+~") == "model":
            value = _WORD.sub(lambda m: table.get(m.group(), m.group()), value)
        out.append(f"{key}{eq}{value}")
    return out


def hydra_argv(argv: list[str]) -> list[str]:
    """The command line as Hydra is given it: models selected (not appended), by catalog
    name."""
    return canonical_models(select_not_append(argv))


# at import: a launcher's worker process (hydra/launcher=joblib) resolves the run's folder,
# ${study.name}, before it calls tune()
register_resolvers()


def main() -> None:
    exit_on_sigterm()
    sys.argv[1:] = hydra_argv(sys.argv[1:])
    overrides = _overrides(sys.argv[1:])
    if overrides is not None:
        from revati.tune.checks import check_overrides

        try:
            check_overrides(overrides)
        except ConfigError as exc:
            _fail(exc)
    tune()


if __name__ == "__main__":
    main()
