import importlib.util
import re

import pytest

from revati.cli.doctor import compare, report_from_devinfo
from revati.cli.main import main as revati_main
from revati.device.spec import CONF_DIR, load_spec


def report_for(spec, gpus=1):
    """A probe report that matches the spec exactly."""
    attrs = spec.device_attributes()
    return {"driver_version": 13000, "devices": [
        {"name": spec.name, "total_memory": spec.memory_bytes, "uuid": f"GPU-{i}",
         "pci_bus_id": f"00000000:{b:02X}:00.0", "attributes": dict(attrs)}
        for i, b in zip(range(gpus), spec.pci_bus_ids, strict=False)]}


def test_a_matching_report_passes():
    spec = load_spec("h200_sxm")
    assert all(ok for _, ok, _ in compare(spec, report_for(spec, 2), gpus=2))


def test_a_differing_attribute_is_named():
    spec = load_spec("h200_sxm")
    report = report_for(spec)
    report["devices"][0]["attributes"]["L2_CACHE_SIZE"] = 52428800  # an H100's 50 MiB
    failed = [(c, d) for c, ok, d in compare(spec, report, gpus=1) if not ok]
    assert failed == [("GPU0 attributes", "L2_CACHE_SIZE=52428800 (spec 62914560)")]


@pytest.mark.parametrize("hardware", ["h200_sxm", "h100_sxm"])
def test_a_measured_spec_is_what_the_real_gpu_reported(hardware):
    spec = load_spec(hardware)
    report = report_from_devinfo(CONF_DIR / f"{hardware}.measured.json")
    checks = compare(spec, report, gpus=None, real=True)
    assert [c for c in checks if not c[1]] == []
    assert spec.measured
    # the deliberate differences are real differences, not stale entries
    real = report["devices"][0]["attributes"]
    assert all(real[k] == v != spec.device_attributes()[k]
               for k, v in spec.emulated_differences.items())


def test_a_wrong_device_count_fails():
    spec = load_spec("h100_sxm")
    assert not all(ok for _, ok, _ in compare(spec, report_for(spec, 1), gpus=2))


@pytest.mark.skipif(importlib.util.find_spec("cuda") is None, reason="cuda-bindings not installed")
def test_doctor_passes_on_the_emulator(capsys):
    assert revati_main(["doctor", "--hardware", "h200_sxm", "--gpus", "2"]) == 0
    out = capsys.readouterr().out
    assert "[FAIL]" not in out and "synchronize waits for queued kernels" in out
    # what is intercepted: every library of the shim, and the driver's coverage
    assert "[ok] intercepted libcuda.so.1/libcuda.so: librevati_cuda.so" in out
    assert "[ok] intercepted libnccl.so.2: librevati_nccl.so" in out
    done, total = map(int, re.search(r"CUDA driver entry points: (\d+) of (\d+)", out).groups())
    assert 0 < done < total
    assert "deployment network: " in out


def test_doctor_names_an_unknown_hardware_in_one_line(capsys):
    assert revati_main(["doctor", "--hardware", "z999"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("revati doctor: unknown hardware 'z999'") and "\n" not in err


def test_an_interposer_that_is_not_loaded_fails_the_check():
    spec = load_spec("h200_sxm")
    report = report_for(spec)
    report["interception"] = {"loaded": {"librevati_cuda.so": ["libcuda.so.1", "libcuda.so"]},
                              "cuda_entry_points": [300, 600]}
    failed = [c for c, ok, _ in compare(spec, report, gpus=1) if not ok]
    assert "intercepted libnccl.so.2" in failed
    assert "intercepted libcuda.so.1/libcuda.so" not in failed
