"""Builds the preloaded native shim as plain shared libraries (not Python extensions).

setuptools' extension machinery gives us the compiler, incremental builds and in-place
output for editable installs (`pip install -e .` leaves a working shim); only the output
file name differs from a Python extension.
"""

import os
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NATIVE = Path("revati/native")
CFLAGS = ["-O2", "-g", "-fvisibility=hidden", "-std=gnu11", "-Wall", "-Wextra",
          "-Wno-unused-parameter", "-D_GNU_SOURCE"]


class BuildNative(build_ext):
    def get_ext_filename(self, fullname: str) -> str:
        # revati.native.librevati_time -> revati/native/librevati_time.so
        *pkg, name = fullname.split(".")
        return str(Path(*pkg, name + ".so"))

    def get_export_symbols(self, ext: Extension) -> list[str]:
        return []  # no PyInit_* symbol: these are not Python modules

    def build_extension(self, ext: Extension) -> None:
        # the device libraries link against librevati_time/_predict, built just before them
        ext.library_dirs.append(str(Path(self.get_ext_fullpath(ext.name)).parent))
        super().build_extension(ext)


# One folder per library (time/, predict/, cuda/, nvml/, nccl/, cublas/); the headers other
# libraries include ("core.h", "predict.h", "cuda_spec.h", ...) are found through these.
HEADER_DIRS = [str(NATIVE / d) for d in ("time", "predict", "cuda")]


def native_lib(name: str, sources: list[str], libs: list[str], extra_link: list[str] = (),
               include_dirs: list[str] = ()) -> Extension:
    return Extension(
        f"revati.native.{name}",
        sources=[str(NATIVE / s) for s in sources],
        depends=[str(p) for p in sorted(NATIVE.rglob("*.h"))],
        extra_compile_args=CFLAGS,
        libraries=libs,
        extra_link_args=list(extra_link),
        include_dirs=HEADER_DIRS + list(include_dirs),
    )


# Device shim: the CUDA driver tables are generated from the CUDA 13 headers.
CUDA_INCLUDE = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda-13.0"), "include")
subprocess.check_call([sys.executable, str(NATIVE / "cuda" / "gen_cuda.py"), str(NATIVE / "cuda"),
                       CUDA_INCLUDE])
CUDA_SOURCES = ["cuda/" + s for s in (
    "cuda.c", "cuda_memory.c", "cuda_stream.c", "cuda_host_kernels.c", "cuda_dilation.c",
    "cuda_launch_queue.c", "cuda_cubin.c", "darkapi.c", "cuda_spec.c", "cuda_stubs.gen.c",
    "cuda_ptds.gen.c", "cuda_enums.gen.c")]
PREDICT_SOURCES = ["predict/" + s for s in (
    "roofline.c", "features.c", "kernel_args.c", "shapes.c", "models.c", "dispatch.c",
    "power.c")]
TIME_SOURCES = ["time/" + s for s in ("core.c", "timeshim.c", "timerfd.c", "timekeeper.c",
                                      "host_rate.c", "loopback.c")]


setup(
    ext_modules=[
        native_lib("librevati_time", TIME_SOURCES, ["dl", "pthread", "rt"]),
        native_lib("librevati_predict", PREDICT_SOURCES, ["dl", "pthread", "m"]),
        native_lib("librevati_cuda", CUDA_SOURCES,
                   ["revati_time", "revati_predict", "dl", "pthread", "m"],
                   ["-Wl,-soname,libcuda.so.1", "-Wl,-rpath,$ORIGIN"], [CUDA_INCLUDE]),
        native_lib("librevati_nvml", ["nvml/nvml.c", "cuda/cuda_spec.c"],
                   ["revati_time", "pthread"],
                   ["-Wl,-soname,libnvidia-ml.so.1", "-Wl,-rpath,$ORIGIN"]),
        native_lib("librevati_nccl", ["nccl/nccl.c"],
                   ["revati_cuda", "revati_time", "revati_predict", "pthread", "rt"],
                   ["-Wl,-soname,libnccl.so.2", "-Wl,-rpath,$ORIGIN"], [CUDA_INCLUDE]),
        native_lib("librevati_cublas", ["cublas/cublas.c"], ["revati_cuda", "revati_time", "dl"],
                   ["-Wl,-rpath,$ORIGIN"], [CUDA_INCLUDE]),
    ],
    cmdclass={"build_ext": BuildNative},
)
