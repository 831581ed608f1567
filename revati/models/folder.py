"""Materialise a catalog model as a local folder an engine loads with `--load-format dummy`.

Layout: DIR/config.json and DIR/generation_config.json (the real model's fields) and
DIR/tokenizer/ (the synthetic tokenizer). The tokenizer has a folder of its own without a
config.json because transformers picks its own tokenizer class from config.json's
model_type (Qwen2 forces a byte-level BPE that cannot read the synthetic vocabulary):
pass it to the engine with `--tokenizer DIR/tokenizer`. No weights, no network.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from revati.models.catalog import load_model
from revati.models.tokenizer import write_tokenizer


@dataclass(frozen=True)
class ModelFolder:
    name: str
    model_dir: Path
    tokenizer_dir: Path


def _write_json(path: Path, data: dict) -> None:
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)


def materialise(name: str, root: Path) -> ModelFolder:
    """Write (or refresh) ROOT/<catalog name>/ for `name` (a catalog name or alias)."""
    spec = load_model(name)
    model_dir = root / spec.name
    model_dir.mkdir(parents=True, exist_ok=True)
    _write_json(model_dir / "config.json", spec.config)
    _write_json(model_dir / "generation_config.json", spec.generation_config)
    tokenizer_dir = model_dir / "tokenizer"
    # The tokenizer depends only on the vocabulary size; rebuilding a 150k-word vocabulary
    # takes a second, so keep an existing one of the right size.
    marker = tokenizer_dir / "vocab_size"
    vocab_size = spec.config["vocab_size"]
    if not marker.is_file() or marker.read_text() != str(vocab_size):
        write_tokenizer(tokenizer_dir, vocab_size)
        marker.write_text(str(vocab_size))
    return ModelFolder(spec.name, model_dir, tokenizer_dir)
