"""Where shipped hardware profiles and trained models live, and what an emulated process needs
in its environment for the C predictor to use them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
PROFILES = DATA / "profiles"
MODELS = DATA / "models"


def profile_dir(hardware: str) -> Path:
    path = PROFILES / hardware
    if not (path / "spec.yaml").exists():
        known = sorted(p.name for p in PROFILES.iterdir()) if PROFILES.exists() else []
        raise FileNotFoundError(f"no hardware profile '{hardware}' (shipped: {known})")
    return path


def shipped_models() -> list[str]:
    """The GPUs (h200, ...) that trained models ship for."""
    return sorted(p.name for p in MODELS.iterdir()
                  if (p / "index.txt").exists()) if MODELS.exists() else []


def models_dir(hardware: str) -> Path:
    path = MODELS / hardware
    if not (path / "index.txt").exists():
        raise FileNotFoundError(f"no trained models for '{hardware}' (shipped: "
                                f"{shipped_models()}); run `revati predictor train --profile DIR`")
    return path


def lightgbm_library() -> Path:
    """lib_lightgbm.so as shipped inside the lightgbm Python package (the C predictor dlopens
    it; nothing is imported, so this works where importing lightgbm would be too slow)."""
    spec = importlib.util.find_spec("lightgbm")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("lightgbm is not installed (pip install revati[predict])")
    for root in spec.submodule_search_locations:
        for candidate in (Path(root) / "lib" / "lib_lightgbm.so", Path(root) / "lib_lightgbm.so"):
            if candidate.exists():
                return candidate
    raise FileNotFoundError(f"lib_lightgbm.so not found under {spec.submodule_search_locations}")


def predictor_env(hardware: str, spec_file: str | Path, transfer: bool = False
                  ) -> dict[str, str]:
    """Environment for an emulated process: this run's GPU spec (REVATI_HW_SPEC, written by
    revati.device.spec) and the models trained on `hardware`; transfer: that is another GPU
    than the run's, whose predictions the C predictor carries over (docs/predictor.md,
    "Another GPU of the same architecture")."""
    env = {"REVATI_HW_SPEC": str(spec_file),
           "REVATI_PREDICT_MODELS": str(models_dir(hardware) / "index.txt"),
           "REVATI_LIGHTGBM_LIB": str(lightgbm_library())}
    return env | {"REVATI_PREDICT_TRANSFER": "1"} if transfer else env
