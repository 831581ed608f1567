import os
import pathlib

import pytest

from revati.device.env import apply_env, emulated_device_env
from revati.device.spec import UnknownHardwareError
from revati.native import NATIVE_DIR


def test_env_points_at_the_shim_and_the_spec(tmp_path):
    env = emulated_device_env("h200_sxm", 8, tmp_path)
    assert env["REVATI_GPUS"] == "8"
    spec = pathlib.Path(env["REVATI_HW_SPEC"])
    assert "name NVIDIA H200" in spec.read_text().splitlines()
    lib = pathlib.Path(env["LD_LIBRARY_PATH"])
    assert os.path.samefile(lib / "libcuda.so.1", NATIVE_DIR / "librevati_cuda.so")
    assert os.path.samefile(lib / "libnvidia-ml.so.1", NATIVE_DIR / "librevati_nvml.so")
    assert env["TRITON_LIBCUDA_PATH"] == str(lib)


def test_env_is_idempotent_per_workdir(tmp_path):
    first = emulated_device_env("h100_sxm", 1, tmp_path)
    assert emulated_device_env("h100_sxm", 1, tmp_path) == first


def test_gpu_count_beyond_the_node_is_refused(tmp_path):
    with pytest.raises(ValueError, match="1..8"):
        emulated_device_env("h200_sxm", 9, tmp_path)


def test_unknown_hardware_is_refused(tmp_path):
    with pytest.raises(UnknownHardwareError):
        emulated_device_env("a100", 1, tmp_path)


def test_apply_env_prepends_search_paths():
    merged = apply_env({"LD_LIBRARY_PATH": "/usr/lib", "PATH": "/bin"},
                       {"LD_LIBRARY_PATH": "/shim", "REVATI_GPUS": "2"})
    assert merged == {"LD_LIBRARY_PATH": "/shim:/usr/lib", "PATH": "/bin", "REVATI_GPUS": "2"}


def test_a_gpu_without_models_takes_those_of_its_architecture(tmp_path):
    h100 = emulated_device_env("h100_sxm", 1, tmp_path / "h100")
    assert pathlib.Path(h100["REVATI_PREDICT_MODELS"]).parent.name == "h200"
    assert h100["REVATI_PREDICT_TRANSFER"] == "1"
    h200 = emulated_device_env("h200_sxm", 1, tmp_path / "h200")
    assert pathlib.Path(h200["REVATI_PREDICT_MODELS"]).parent.name == "h200"
    assert "REVATI_PREDICT_TRANSFER" not in h200


def test_without_lightgbm_every_gpu_falls_back_to_the_roofline(tmp_path, monkeypatch):
    from revati.predict import registry

    def missing() -> pathlib.Path:
        raise FileNotFoundError("lightgbm is not installed")

    monkeypatch.setattr(registry, "lightgbm_library", missing)
    for hardware in ("h200_sxm", "h100_sxm"):
        env = emulated_device_env(hardware, 1, tmp_path / hardware)
        assert "REVATI_PREDICT_MODELS" not in env and "REVATI_PREDICT_TRANSFER" not in env
        assert env["REVATI_HW_SPEC"]
