"""Revati: GPU-free time-warp emulation of LLM serving engines."""

__version__ = "0.1.0"
