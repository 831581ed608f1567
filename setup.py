"""Builds the preloaded native shim as plain shared libraries (not Python extensions).

setuptools' extension machinery gives us the compiler, incremental builds and in-place
output for editable installs (`pip install -e .` leaves a working shim); only the output
file name differs from a Python extension.
"""

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


def native_lib(name: str, sources: list[str], libs: list[str], extra_link: list[str] = ()) -> Extension:
    return Extension(
        f"revati.native.{name}",
        sources=[str(NATIVE / s) for s in sources],
        depends=[str(p) for p in NATIVE.glob("*.h")],
        extra_compile_args=CFLAGS,
        libraries=libs,
        extra_link_args=list(extra_link),
    )


setup(
    ext_modules=[
        native_lib("librevati_time", ["core.c", "timeshim.c", "timekeeper.c"], ["dl", "pthread", "rt"]),
        native_lib("librevati_predict", ["predict.c"], ["dl", "pthread", "m"]),
    ],
    cmdclass={"build_ext": BuildNative},
)
