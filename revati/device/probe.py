"""What the CUDA driver and NVML of this process report, as JSON (`python -m revati.device.probe`).

The same probe runs against the emulated driver (under emulated_device_env) and against a
real GPU, so `revati doctor` compares either with a hardware spec the same way: on the
emulator it checks the shim, on a real GPU it checks (and lets us correct) the spec.
With --timing (emulator only: the kernel image is not a real one), it also times queued
launches against REVATI_PREDICT_FIXED_NS.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def _ok(result):
    err, *values = result
    if int(err) != 0:
        raise RuntimeError(f"CUDA driver call failed: {err!r}")
    return values[0] if len(values) == 1 else values


def probe_driver() -> dict:
    from cuda.bindings import driver as cu

    _ok(cu.cuInit(0))
    out = {"driver_version": _ok(cu.cuDriverGetVersion()), "devices": []}
    for dev in range(_ok(cu.cuDeviceGetCount())):
        attributes = {}
        # __members__ includes the aliases (VIRTUAL_MEMORY_/VIRTUAL_ADDRESS_MANAGEMENT_...)
        for member, attr in cu.CUdevice_attribute.__members__.items():
            name = member.removeprefix("CU_DEVICE_ATTRIBUTE_")
            if name == "MAX":
                continue
            err, value = cu.cuDeviceGetAttribute(attr, dev)
            attributes[name] = value if int(err) == 0 else None
        uuid = bytes(_ok(cu.cuDeviceGetUuid(dev)).bytes).hex()
        out["devices"].append({
            "name": _ok(cu.cuDeviceGetName(256, dev)).split(b"\0")[0].decode(),
            "total_memory": _ok(cu.cuDeviceTotalMem(dev)),
            "uuid": f"GPU-{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:]}",
            "pci_bus_id": _ok(cu.cuDeviceGetPCIBusId(32, dev)).split(b"\0")[0].decode(),
            "attributes": attributes,
        })
    return out


def probe_nvml() -> list[dict]:
    import pynvml

    pynvml.nvmlInit()
    gpus = []
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        gpus.append({"name": pynvml.nvmlDeviceGetName(h), "uuid": pynvml.nvmlDeviceGetUUID(h),
                     "pci_bus_id": pynvml.nvmlDeviceGetPciInfo(h).busId,
                     "memory_total": pynvml.nvmlDeviceGetMemoryInfo(h).total})
    pynvml.nvmlShutdown()
    return gpus


def probe_timing(launches: int) -> dict:
    """Queue `launches` kernels and synchronize; seconds from first launch to the end."""
    from cuda.bindings import driver as cu

    ctx = _ok(cu.cuDevicePrimaryCtxRetain(0))
    _ok(cu.cuCtxSetCurrent(ctx))
    module = _ok(cu.cuModuleLoadData(b"emulated: the image is not parsed"))
    kernel = _ok(cu.cuModuleGetFunction(module, b"revati_probe_kernel"))
    start = time.perf_counter()
    for _ in range(launches):
        _ok(cu.cuLaunchKernel(kernel, 1, 1, 1, 32, 1, 1, 0, 0, 0, 0))
    queued = time.perf_counter() - start
    _ok(cu.cuCtxSynchronize())
    return {"launches": launches, "queued_s": queued, "synchronized_s": time.perf_counter() - start}


def probe_interception() -> dict:
    """Which of Revati's libraries this process has loaded (after cuInit and NVML), under
    the names it stands in for, and how many CUDA driver entry points are implemented."""
    import ctypes
    import os

    from revati.device.env import LIBRARY_NAMES

    with open("/proc/self/maps") as f:
        loaded = {os.path.basename(fields[5]) for fields in map(str.split, f)
                  if len(fields) >= 6 and fields[5].startswith("/")}
    out: dict[str, object] = {"loaded": {lib: list(names) for lib, names in LIBRARY_NAMES.items()
                                         if lib in loaded}}
    try:
        cov = ctypes.CDLL("libcuda.so.1").rv_cuda_coverage
        implemented, total = ctypes.c_int(), ctypes.c_int()
        cov(ctypes.byref(implemented), ctypes.byref(total))
        out["cuda_entry_points"] = [implemented.value, total.value]
    except (OSError, AttributeError):
        out["cuda_entry_points"] = None  # a real driver
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--timing", type=int, metavar="LAUNCHES", default=0)
    parser.add_argument("--interception", action="store_true",
                        help="also report which libraries are interposed")
    args = parser.parse_args(argv)
    out = probe_driver()
    try:
        out["nvml"] = probe_nvml()
    except Exception as e:  # no NVML here: reported, not fatal
        out["nvml_error"] = str(e)
    if args.timing:
        out["timing"] = probe_timing(args.timing)
    if args.interception:
        out["interception"] = probe_interception()
    json.dump(out, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
