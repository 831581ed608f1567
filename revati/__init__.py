"""Revati: GPU-free time-warp emulation of LLM serving engines."""

from pathlib import Path

__version__ = "0.1.0"

# Package data: hardware specs, the model catalog and revati-tune's Hydra config groups.
CONF_DIR = Path(__file__).resolve().parent / "conf"
