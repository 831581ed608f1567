"""Dump what a real GPU reports about itself, for the device shim to reproduce.

Every CU_DEVICE_ATTRIBUTE_* enumerator of cuda.h through cuDeviceGetAttribute (libcuda.so.1 via
ctypes), cuDeviceTotalMem, cuDeviceGetName, the driver version, torch's device properties and
mem_get_info, and NVML's name, memory, clocks, power and PCI information.

    python -m revati.profile.devinfo --out h200_sxm.measured.json [--cuda-h PATH]
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import glob
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

ATTR = re.compile(r"^\s*(CU_DEVICE_ATTRIBUTE_\w+)\s*=\s*(\d+)", re.M)


def find_cuda_h() -> Path:
    for pattern in ("/usr/local/cuda/include/cuda.h", "/usr/local/cuda-*/include/cuda.h",
                    "/usr/include/cuda.h"):
        for hit in sorted(glob.glob(pattern)):
            return Path(hit)
    raise FileNotFoundError("cuda.h not found: pass --cuda-h")


def driver_attributes(cuda_h: Path) -> dict[str, object]:
    cu = ctypes.CDLL("libcuda.so.1")

    def check(rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"{what} failed with CUresult {rc}")

    check(cu.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    out: dict[str, object] = {}
    version = ctypes.c_int()
    check(cu.cuDriverGetVersion(ctypes.byref(version)), "cuDriverGetVersion")
    out["cuDriverGetVersion"] = version.value
    name = ctypes.create_string_buffer(256)
    check(cu.cuDeviceGetName(name, 256, dev), "cuDeviceGetName")
    out["cuDeviceGetName"] = name.value.decode()
    total = ctypes.c_size_t()
    check(cu.cuDeviceTotalMem_v2(ctypes.byref(total), dev), "cuDeviceTotalMem_v2")
    out["cuDeviceTotalMem"] = total.value
    attrs: dict[str, object] = {}
    for enum_name, value in ATTR.findall(cuda_h.read_text()):
        if enum_name == "CU_DEVICE_ATTRIBUTE_MAX":
            continue
        v = ctypes.c_int()
        rc = cu.cuDeviceGetAttribute(ctypes.byref(v), int(value), dev)
        attrs[enum_name] = {"enum": int(value), "value": v.value} if rc == 0 else \
            {"enum": int(value), "error": rc}
    out["cuDeviceGetAttribute"] = attrs
    return out


def torch_properties() -> dict[str, object]:
    import torch

    props = torch.cuda.get_device_properties(0)
    fields = {}
    for key in dir(props):
        if key.startswith("_"):
            continue
        value = getattr(props, key)
        if callable(value):
            continue
        fields[key] = value if isinstance(value, int | float | str | bool) else str(value)
    free, total = torch.cuda.mem_get_info(0)
    return {"version": torch.__version__, "cuda": torch.version.cuda,
            "get_device_properties": fields, "mem_get_info": {"free": free, "total": total}}


def nvml_info() -> dict[str, object]:
    import pynvml as nv

    nv.nvmlInit()
    h = nv.nvmlDeviceGetHandleByIndex(0)
    out: dict[str, object] = {}

    def get(key: str, fn: Callable[[], object]) -> None:
        try:
            value = fn()
            out[key] = value.decode() if isinstance(value, bytes) else value
        except nv.NVMLError as exc:
            out[key] = f"error: {exc}"

    get("driver_version", nv.nvmlSystemGetDriverVersion)
    get("nvml_version", nv.nvmlSystemGetNVMLVersion)
    get("cuda_driver_version", nv.nvmlSystemGetCudaDriverVersion)
    get("name", lambda: nv.nvmlDeviceGetName(h))
    get("architecture", lambda: nv.nvmlDeviceGetArchitecture(h))
    get("cuda_compute_capability", lambda: list(nv.nvmlDeviceGetCudaComputeCapability(h)))
    get("memory", lambda: {k: getattr(m, k) for k in ("total", "free", "used")}
        if (m := nv.nvmlDeviceGetMemoryInfo(h)) else None)
    get("bar1_memory", lambda: {k: getattr(m, k) for k in ("bar1Total", "bar1Free", "bar1Used")}
        if (m := nv.nvmlDeviceGetBAR1MemoryInfo(h)) else None)
    get("memory_bus_width", lambda: nv.nvmlDeviceGetMemoryBusWidth(h))
    clocks = {"graphics": nv.NVML_CLOCK_GRAPHICS, "sm": nv.NVML_CLOCK_SM,
              "mem": nv.NVML_CLOCK_MEM, "video": nv.NVML_CLOCK_VIDEO}
    for cname, cid in clocks.items():
        get(f"clock_{cname}_mhz", lambda cid=cid: nv.nvmlDeviceGetClockInfo(h, cid))
        get(f"max_clock_{cname}_mhz", lambda cid=cid: nv.nvmlDeviceGetMaxClockInfo(h, cid))
        get(f"application_clock_{cname}_mhz",
            lambda cid=cid: nv.nvmlDeviceGetApplicationsClock(h, cid))
        get(f"default_application_clock_{cname}_mhz",
            lambda cid=cid: nv.nvmlDeviceGetDefaultApplicationsClock(h, cid))
    get("power_usage_mw", lambda: nv.nvmlDeviceGetPowerUsage(h))
    get("power_limit_mw", lambda: nv.nvmlDeviceGetPowerManagementLimit(h))
    get("power_default_limit_mw", lambda: nv.nvmlDeviceGetPowerManagementDefaultLimit(h))
    get("power_enforced_limit_mw", lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h))
    get("power_limit_constraints_mw",
        lambda: list(nv.nvmlDeviceGetPowerManagementLimitConstraints(h)))
    get("temperature_gpu_c", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
    get("pci", lambda: {k: (v.decode() if isinstance(v, bytes) else v)
                        for k in ("busId", "domain", "bus", "device", "pciDeviceId",
                                  "pciSubSystemId")
                        if (v := getattr(nv.nvmlDeviceGetPciInfo(h), k, None)) is not None})
    get("pcie_link_gen_current", lambda: nv.nvmlDeviceGetCurrPcieLinkGeneration(h))
    get("pcie_link_gen_max", lambda: nv.nvmlDeviceGetMaxPcieLinkGeneration(h))
    get("pcie_link_width_current", lambda: nv.nvmlDeviceGetCurrPcieLinkWidth(h))
    get("pcie_link_width_max", lambda: nv.nvmlDeviceGetMaxPcieLinkWidth(h))
    get("multiprocessor_count_nvml", lambda: nv.nvmlDeviceGetNumGpuCores(h))
    get("compute_mode", lambda: nv.nvmlDeviceGetComputeMode(h))
    get("persistence_mode", lambda: nv.nvmlDeviceGetPersistenceMode(h))
    get("mig_mode", lambda: list(nv.nvmlDeviceGetMigMode(h)))
    get("ecc_mode", lambda: list(nv.nvmlDeviceGetEccMode(h)))
    links = {}
    for link in range(18):  # NVML_NVLINK_MAX_LINKS on Hopper
        try:
            links[link] = {"state": nv.nvmlDeviceGetNvLinkState(h, link),
                           "version": nv.nvmlDeviceGetNvLinkVersion(h, link)}
        except nv.NVMLError as exc:
            links[link] = f"error: {exc}"
    out["nvlink"] = links
    nv.nvmlShutdown()
    return out


def collect(cuda_h: Path | None) -> dict[str, object]:
    doc: dict[str, object] = {"date": datetime.datetime.now(datetime.UTC).isoformat(),
                              "command": " ".join(["python -m revati.profile.devinfo",
                                                   *sys.argv[1:]])}
    for key, fn in (("driver_api", lambda: driver_attributes(cuda_h or find_cuda_h())),
                    ("torch", torch_properties), ("nvml", nvml_info)):
        try:
            doc[key] = fn()
        except Exception as exc:  # noqa: BLE001 - keep the other sections, record why
            doc[key] = {"error": f"{type(exc).__name__}: {exc}"}
    return doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="revati.profile.devinfo", description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--cuda-h", type=Path, default=None)
    args = parser.parse_args(argv)
    doc = collect(args.cuda_h)
    Path(args.out).write_text(json.dumps(doc, indent=1, sort_keys=False, default=str) + "\n")
    print(f"[devinfo] {len(doc.get('driver_api', {}).get('cuDeviceGetAttribute', {}))} "
          f"attributes -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
