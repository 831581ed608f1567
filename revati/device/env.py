"""Environment of a process that runs on emulated GPUs.

The device shim is built as revati/native/librevati_cuda.so (SONAME libcuda.so.1),
librevati_nvml.so (SONAME libnvidia-ml.so.1) and librevati_nccl.so (SONAME libnccl.so.2).
CUDA libraries find the driver by dlopen("libcuda.so.1"), so the process needs a directory
on LD_LIBRARY_PATH holding files of those exact names; we make one per run under the
workdir, of symlinks, rather than shipping files named like the real driver inside the
package. The unversioned names are there for Triton, which links its launcher stubs with
-lcuda.
"""

from __future__ import annotations

import logging
import os
import pathlib

from revati.device.spec import HardwareSpec, gpu_family, load_spec, write_flat
from revati.native import library
from revati.predict.registry import predictor_env, shipped_models

log = logging.getLogger("revati.device")

# built library -> names it must be found under. The device libraries find the core and
# the predictor through $ORIGIN, which is the directory of the link, not of its target,
# so those two are linked under their own names.
LIBRARY_NAMES = {
    "librevati_cuda.so": ("libcuda.so.1", "libcuda.so"),
    "librevati_nvml.so": ("libnvidia-ml.so.1", "libnvidia-ml.so"),
    "librevati_nccl.so": ("libnccl.so.2",),
    "librevati_cublas.so": ("librevati_cublas.so",),
    "librevati_time.so": ("librevati_time.so",),
    "librevati_predict.so": ("librevati_predict.so",),
}


def _link(target: pathlib.Path, link: pathlib.Path) -> None:
    if link.is_symlink() or link.exists():
        if link.resolve() == target.resolve():
            return
        link.unlink()
    link.symlink_to(target)


def driver_dir(workdir: pathlib.Path) -> pathlib.Path:
    """Directory with libcuda.so.1 / libnvidia-ml.so.1 pointing at the built shim."""
    lib = workdir / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    for built, names in LIBRARY_NAMES.items():
        target = library(built)
        for name in names:
            _link(target, lib / name)
    return lib


def _predictor(spec: HardwareSpec, spec_file: pathlib.Path) -> dict[str, str]:
    """The predictor's environment: this run's spec and the duration models trained for this
    GPU (revati/predict/data/models/<gpu>, named by the part of the spec name before the form
    factor: h200_sxm -> h200). A GPU without models of its own takes those of a GPU of the
    same architecture (the H100 the H200's), whose times the C predictor carries over by the
    two rooflines; with neither (or no LightGBM), the predictor falls back to the roofline for
    every kernel. The run says which."""
    gpu = gpu_family(spec.key)
    models = gpu
    shipped = shipped_models()
    if gpu not in shipped:
        kin = [g for g in shipped if load_spec(g).architecture == spec.architecture]
        if kin:
            models = kin[0]
            log.warning("no trained models for '%s': using the %s's, each kernel's time plus "
                        "what this GPU's roofline adds to the %s's (docs/predictor.md)",
                        gpu, models, models)
    try:
        return predictor_env(models, spec_file, transfer=models != gpu)
    except FileNotFoundError as e:
        log.warning("%s: kernel durations come from the roofline alone", e)
        return {"REVATI_HW_SPEC": str(spec_file)}


def emulated_device_env(hardware: str, gpus: int, workdir: pathlib.Path) -> dict[str, str]:
    """Variables to add to a child's environment so it sees `gpus` GPUs of `hardware`.

    LD_LIBRARY_PATH, LD_PRELOAD and LIBRARY_PATH hold only our entries: the caller prepends
    them to any existing value (apply_env does).
    """
    spec = load_spec(hardware)
    if not 1 <= gpus <= spec.gpus_per_node:
        raise ValueError(f"{hardware}: gpus must be 1..{spec.gpus_per_node}, got {gpus}")
    workdir = pathlib.Path(workdir).resolve()
    spec_file = write_flat(spec, workdir / f"hw_{spec.key}.spec")
    lib = driver_dir(workdir)
    return {
        **_predictor(spec, spec_file),
        "LD_LIBRARY_PATH": str(lib),
        # torch finds NCCL through its RPATH, which LD_LIBRARY_PATH cannot override; a
        # preloaded library of the same SONAME satisfies that lookup and vLLM's dlopen.
        # The time shim comes first: it finds libc's functions as the next definitions, so
        # it must precede libc in the search order, which a mere dependency would not.
        # librevati_cublas interposes cuBLAS's GEMM entry points to pass shapes on.
        "LD_PRELOAD": ":".join(str(lib / n) for n in
                               ("librevati_time.so", "libnccl.so.2", "librevati_cublas.so")),
        "REVATI_GPUS": str(gpus),
        # Triton otherwise asks `ldconfig -p` where libcuda is, which finds no driver here.
        "TRITON_LIBCUDA_PATH": str(lib),
        # Kernels built at run time link the driver with -lcuda, which a GPU machine's
        # system library path resolves (FlashInfer's top-k/top-p sampler under SGLang); the
        # compiler looks in LIBRARY_PATH too, and the shim's SONAME is the driver's.
        "LIBRARY_PATH": str(lib),
    }


def apply_env(base: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    """Merge `extra` into a copy of `base`, prepending to path-like variables."""
    out = dict(base)
    for key, value in extra.items():
        if key in ("LD_LIBRARY_PATH", "LD_PRELOAD", "LIBRARY_PATH") and out.get(key):
            out[key] = value + ":" + out[key]
        else:
            out[key] = value
    return out


def current_env_with(hardware: str, gpus: int, workdir: pathlib.Path) -> dict[str, str]:
    """os.environ plus the emulated-device variables (for tests and `revati doctor`)."""
    return apply_env(dict(os.environ), emulated_device_env(hardware, gpus, workdir))
