"""Materialise a catalog model as a local folder an engine loads with `--load-format dummy`.

Layout: DIR/config.json and DIR/generation_config.json (the real model's fields) and
DIR/tokenizer/ (the synthetic tokenizer). The tokenizer has a folder of its own without a
config.json because transformers picks its own tokenizer class from config.json's
model_type (Qwen2 forces a byte-level BPE that cannot read the synthetic vocabulary):
pass it to the engine with `--tokenizer DIR/tokenizer`. No weights, no network.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
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
    # atomically: several benchmarks may materialise the same cached folder at once
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    if not path.is_file() or path.read_text() != text:
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, path)


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
        # built aside and renamed into place, so no reader sees half a tokenizer
        tmp = Path(tempfile.mkdtemp(prefix=".tokenizer-", dir=model_dir))
        write_tokenizer(tmp, vocab_size)
        (tmp / "vocab_size").write_text(str(vocab_size))
        shutil.rmtree(tokenizer_dir, ignore_errors=True)
        try:
            os.rename(tmp, tokenizer_dir)
        except OSError:  # another writer's identical tokenizer got there first
            shutil.rmtree(tmp, ignore_errors=True)
    return ModelFolder(spec.name, model_dir, tokenizer_dir)
