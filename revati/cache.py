"""Where Revati keeps what outlives one run: ~/.cache/revati (or $XDG_CACHE_HOME/revati)."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "revati"
# Catalog models materialised for engines. One stable folder per model matters beyond
# saving a second: vLLM keys its torch.compile and Triton caches on the model path, so a
# folder per run would recompile every kernel in every run, and a Triton kernel compiled
# while serving stalls the engine for seconds of virtual time.
MODELS_DIR = CACHE_DIR / "models"
