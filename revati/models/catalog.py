"""The model catalog: conf/model/*.yaml, one file per model, plus one-line alias files.

A model file holds the Hugging Face `config.json` and `generation_config.json` fields of
the real model; an alias file is a Hydra defaults list naming the model it stands for, so
that `+model=llama70b` works in revati-tune and `load_model("llama70b")` works here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

# conf/ sits next to the package in the source tree (the Hydra config groups of revati-tune).
CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
MODEL_DIR = CONF_DIR / "model"


class UnknownModelError(ValueError):
    """A model name that is neither a catalog entry nor an alias of one."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    hf_id: str
    config: dict[str, Any]
    generation_config: dict[str, Any]


def _alias_target(data: dict[str, Any]) -> str | None:
    defaults = [d for d in data.get("defaults", []) if d != "_self_"]
    return defaults[0] if len(defaults) == 1 and "name" not in data else None


def _read(name: str) -> dict[str, Any]:
    path = MODEL_DIR / f"{name}.yaml"
    if not path.is_file():
        raise UnknownModelError(
            f"unknown model '{name}' (known: {', '.join(list_models(aliases=True))})"
        )
    data = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    assert isinstance(data, dict)
    return data


def list_models(aliases: bool = False) -> list[str]:
    """Catalog names (and, with aliases=True, alias names too), sorted."""
    names = []
    for path in sorted(MODEL_DIR.glob("*.yaml")):
        is_alias = _alias_target(OmegaConf.to_container(OmegaConf.load(path))) is not None
        if aliases or not is_alias:
            names.append(path.stem)
    return names


def resolve_name(name: str) -> str:
    """The catalog name that `name` (a catalog name or an alias) stands for."""
    target = _alias_target(_read(name))
    return name if target is None else resolve_name(target)


def load_model(name: str) -> ModelSpec:
    data = _read(resolve_name(name))
    return ModelSpec(
        name=data["name"],
        hf_id=data["hf_id"],
        config=data["config"],
        generation_config=data["generation_config"],
    )
