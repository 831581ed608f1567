import pathlib
import re

import pytest
import yaml

from revati.device.spec import (
    CONF_DIR,
    PER_DEVICE_ATTRIBUTES,
    SpecError,
    UnknownHardwareError,
    flat_lines,
    known_hardware,
    load_spec,
)

CUDA_H = pathlib.Path("/usr/local/cuda-13.0/include/cuda.h")


def test_known_hardware_lists_the_shipped_specs():
    assert {"h100_sxm", "h200_sxm"} <= set(known_hardware())


def test_unknown_hardware_is_named_and_known_ones_listed():
    with pytest.raises(UnknownHardwareError) as err:
        load_spec("h300_sxm")
    assert "h300_sxm" in str(err.value)
    assert "h200_sxm" in str(err.value) and "h100_sxm" in str(err.value)


def test_flat_file_carries_the_predictor_keys():
    spec = load_spec("h200_sxm")
    flat = dict(line.split(" ", 1) for line in flat_lines(spec))
    assert flat["name"] == "NVIDIA H200"
    assert int(flat["sm_count"]) == 132
    assert int(flat["memory_bytes"]) == spec.memory_bytes
    for dtype in ("fp32", "tf32", "fp16", "bf16", "fp8"):
        assert float(flat[f"peak_flops.{dtype}"]) == spec.peak_flops[dtype]
    for key in ("hbm_bytes_per_s", "nvlink_bytes_per_s", "pcie_bytes_per_s"):
        assert float(flat[key]) == getattr(spec, key)
    assert int(flat["launch_overhead_ns"]) == spec.launch_overhead_ns
    assert float(flat["hbm_bytes_per_s"]) == 4.8e12
    assert int(flat["launch_queue"]) == spec.launch_queue == 1021  # measured on the H200


def test_derived_attributes_restate_top_level_fields():
    spec = load_spec("h100_sxm")
    attrs = spec.device_attributes()
    assert attrs["MULTIPROCESSOR_COUNT"] == spec.sm_count
    assert attrs["L2_CACHE_SIZE"] == spec.l2_bytes
    assert (attrs["COMPUTE_CAPABILITY_MAJOR"], attrs["COMPUTE_CAPABILITY_MINOR"]) == (9, 0)
    assert attrs["MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"] == spec.shared_memory["per_block_optin"]


@pytest.mark.skipif(not CUDA_H.is_file(), reason="CUDA 13 headers not installed")
@pytest.mark.parametrize("hardware", ["h100_sxm", "h200_sxm"])
def test_every_driver_attribute_has_a_value(hardware):
    block = re.search(r"typedef enum CUdevice_attribute_enum \{(.*?)\}", CUDA_H.read_text(), re.S)
    names = set(re.findall(r"CU_DEVICE_ATTRIBUTE_(\w+)\s*=", block.group(1))) - {"MAX"}
    by_value = {}
    for name, value in re.findall(r"CU_DEVICE_ATTRIBUTE_(\w+)\s*=\s*(\d+)", block.group(1)):
        by_value.setdefault(int(value), set()).add(name)
    covered = set(load_spec(hardware).device_attributes()) | set(PER_DEVICE_ATTRIBUTES)
    missing = [sorted(n)[0] for n in by_value.values() if not n & covered]
    assert not missing, f"attributes with no value in {hardware}: {missing}"
    assert covered - names == set(), "spec names attributes cuda.h does not have"


def _write_variant(tmp_path, **changes) -> pathlib.Path:
    raw = yaml.safe_load((CONF_DIR / "h200_sxm.yaml").read_text())
    for key, value in changes.items():
        if value is None:
            raw.pop(key)
        else:
            raw[key] = value
    (tmp_path / "variant.yaml").write_text(yaml.safe_dump(raw))
    return tmp_path


def test_missing_field_is_reported(tmp_path):
    with pytest.raises(SpecError, match="sm_count"):
        load_spec("variant", _write_variant(tmp_path, sm_count=None))


def test_restating_a_derived_attribute_is_rejected(tmp_path):
    raw = yaml.safe_load((CONF_DIR / "h200_sxm.yaml").read_text())
    attrs = dict(raw["attributes"], MULTIPROCESSOR_COUNT=100)
    with pytest.raises(SpecError, match="MULTIPROCESSOR_COUNT"):
        load_spec("variant", _write_variant(tmp_path, attributes=attrs))


def test_non_positive_figure_is_rejected(tmp_path):
    with pytest.raises(SpecError, match="hbm_bytes_per_s"):
        load_spec("variant", _write_variant(tmp_path, hbm_bytes_per_s=0))


def test_sustained_power_is_optional_and_checked(tmp_path):
    assert load_spec("variant", _write_variant(tmp_path, sustained_power=None)).sustained_power \
        is None
    with pytest.raises(SpecError, match="sustained_power"):
        load_spec("variant", _write_variant(tmp_path, sustained_power={"gemm_slowdown": 1.2}))
    with pytest.raises(SpecError, match="factors >= 1"):
        load_spec("variant", _write_variant(tmp_path, sustained_power={
            "gemm_slowdown": 0.9, "attention_slowdown": 1.3, "time_constant_ms": 50,
            "throttle_onset": 0.6, "throttle_full": 0.8}))
    with pytest.raises(SpecError, match="throttle_onset < throttle_full"):
        load_spec("variant", _write_variant(tmp_path, sustained_power={
            "gemm_slowdown": 1.2, "attention_slowdown": 1.3, "time_constant_ms": 50,
            "throttle_onset": 0.8, "throttle_full": 0.6}))
    with pytest.raises(SpecError, match="memory_load is a power load"):
        load_spec("variant", _write_variant(tmp_path, sustained_power={
            "gemm_slowdown": 1.2, "attention_slowdown": 1.3, "time_constant_ms": 50,
            "throttle_onset": 0.6, "throttle_full": 0.8, "memory_load": 1.0}))
    flat = flat_lines(load_spec("h200_sxm"))
    assert "power.gemm_slowdown 1.181" in flat and "power.throttle_onset 0.632" in flat
    assert "power.memory_load 0.0" in flat  # not measured on the H200


@pytest.mark.parametrize(("key", "h200"), [("host_cpu_ms", 17.3), ("host_torch_ms", 13.6)])
def test_the_gpu_nodes_host_cpu_figures_are_optional_and_checked(tmp_path, key, h200):
    assert getattr(load_spec("h200_sxm"), key) == h200
    assert getattr(load_spec("variant", _write_variant(tmp_path, **{key: None})), key) is None
    with pytest.raises(SpecError, match=key):
        load_spec("variant", _write_variant(tmp_path, **{key: -1}))
