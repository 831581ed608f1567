"""The native libraries built from this folder (setup.py, run by `pip install -e .`), found
in one place."""

from __future__ import annotations

from pathlib import Path

NATIVE_DIR = Path(__file__).resolve().parent


class NativeNotBuilt(RuntimeError):
    """A native library has not been compiled."""


def library(name: str) -> Path:
    """The built library `name` (e.g. librevati_time.so); NativeNotBuilt when it is not."""
    path = NATIVE_DIR / name
    if not path.is_file():
        raise NativeNotBuilt(f"the native library {path} is not built; run `pip install -e .` "
                             "in the repository (scripts/install.sh does)")
    return path
