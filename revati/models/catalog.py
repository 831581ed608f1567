"""The model catalog: revati/conf/model/*.yaml, one file per model.

A model file holds the Hugging Face `config.json` and `generation_config.json` fields of
the real model, and the short names it also goes by (`aliases: [llama70b]`), so that
`load_model("llama70b")` works here, `revati bench --model llama70b` too, and revati-tune
takes `model=llama70b` (its command line is rewritten to the catalog name before Hydra
composes it: `alias_table` is the one list of aliases).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from revati import CONF_DIR

MODEL_DIR = CONF_DIR / "model"


class UnknownModelError(ValueError):
    """A model name that is neither a catalog entry nor an alias of one."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    hf_id: str
    config: dict[str, Any]
    generation_config: dict[str, Any]


def _load(path: Path) -> dict[str, Any]:
    data = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    assert isinstance(data, dict), path
    return data


def _aliases(path: Path) -> list[str]:
    """The `aliases` of a model file, read without parsing the rest of it."""
    aliases = OmegaConf.load(path).get("aliases") or []
    return [str(a) for a in aliases]


def alias_table() -> dict[str, str]:
    """Every alias with the catalog name it stands for."""
    names = set(list_models())
    table: dict[str, str] = {}
    for path in sorted(MODEL_DIR.glob("*.yaml")):
        for alias in _aliases(path):
            if alias in names or alias in table:
                other = alias if alias in names else table[alias]
                raise ValueError(f"{path}: alias '{alias}' is already a name of {other}")
            table[alias] = path.stem
    return table


def list_models(aliases: bool = False) -> list[str]:
    """Catalog names (and, with aliases=True, alias names too), sorted."""
    names = [p.stem for p in MODEL_DIR.glob("*.yaml")]
    return sorted([*names, *alias_table()] if aliases else names)


def resolve_name(name: str) -> str:
    """The catalog name that `name` (a catalog name or an alias) stands for."""
    if (MODEL_DIR / f"{name}.yaml").is_file():
        return name
    table = alias_table()
    if name in table:
        return table[name]
    raise UnknownModelError(
        f"unknown model '{name}' (known: {', '.join(list_models(aliases=True))})"
    )


def load_model(name: str) -> ModelSpec:
    data = _load(MODEL_DIR / f"{resolve_name(name)}.yaml")
    return ModelSpec(
        name=data["name"],
        hf_id=data["hf_id"],
        config=data["config"],
        generation_config=data["generation_config"],
    )
