"""Fixtures for revati-tune tests: composed configs and running the real console script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from revati.models.catalog import CONF_DIR
from revati.tune.app import hydra_argv  # registers revati/conf/'s resolvers


@pytest.fixture
def make_cfg():
    """Compose revati/conf/ with overrides, as the app would (hardware_key filled in, since the
    ${hydra:} resolver needs a running Hydra job)."""

    def make(*overrides: str, hardware: str = "h200_sxm"):
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(config_name="config",
                          overrides=hydra_argv([f"hardware={hardware}", *overrides]))
        OmegaConf.update(cfg, "hardware_key", hardware)
        return cfg

    return make


def _run_tune(cwd: Path, *args: str, env: dict[str, str] | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "revati.tune.app", *args, "study.show_progress=false"],
        cwd=cwd, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})})


@pytest.fixture
def run_tune():
    """Run the app in a folder the way a user does (python -m keeps this interpreter)."""
    return _run_tune
