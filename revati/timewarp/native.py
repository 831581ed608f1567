"""The time shim's path, and its Timekeeper entry points through ctypes."""

from __future__ import annotations

import ctypes
from functools import cache
from pathlib import Path

from revati.native import library


def time_shim_path() -> Path:
    return library("librevati_time.so")


@cache
def timekeeper_lib() -> ctypes.CDLL:
    """The shim loaded into the Timekeeper process for its rv_tk_* functions.

    Loaded RTLD_LOCAL, so its libc wrappers do not interpose on this process's own calls;
    REVATI_SHM is unset here, so they would pass straight through anyway."""
    lib = ctypes.CDLL(str(time_shim_path()), mode=ctypes.RTLD_LOCAL)
    lib.rv_tk_create.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    lib.rv_tk_run.argtypes = [ctypes.c_int64, ctypes.c_int64]
    lib.rv_tk_reserve.argtypes = [ctypes.c_int]
    lib.rv_tk_child_started.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.rv_tk_report.argtypes = [ctypes.c_char_p, ctypes.c_int]
    lib.rv_tk_now.restype = ctypes.c_int64
    lib.rv_tk_set_cores.argtypes = [ctypes.c_int]
    lib.rv_tk_set_speed.argtypes = [ctypes.c_int64]
    lib.rv_tk_contention.argtypes = [ctypes.POINTER(ctypes.c_double)]
    lib.rv_tk_jumps.restype = ctypes.c_uint32
    lib.rv_tk_pids.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    return lib
