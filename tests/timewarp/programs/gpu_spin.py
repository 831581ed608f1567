"""An emulated GPU's driving thread: spins CPU_S seconds of its own CPU time in stretches of
2 ms, recording an event on the GPU after each (a GPU call, as a launch loop makes), and
prints the virtual time that took and how often the thread waited meanwhile (voluntary
context switches). Runs under `revati run --hardware` or a Deployment with the device shim."""

import ctypes
import os
import resource
import sys
import time

CPU_S = float(sys.argv[1])
cu = ctypes.CDLL("libcuda.so.1")


def ok(r: int) -> None:
    assert r == 0, f"CUDA error {r}"


ok(cu.cuInit(0))
ctx, event = ctypes.c_void_p(), ctypes.c_void_p()
ok(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0))
ok(cu.cuCtxSetCurrent(ctx))
ok(cu.cuEventCreate(ctypes.byref(event), 0))
ok(cu.cuEventRecord(event, None))  # the thread's first GPU call: it now drives a GPU
c0, v0 = time.thread_time(), time.monotonic()
waits0 = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
while time.thread_time() - c0 < CPU_S:
    s0 = time.thread_time()
    while time.thread_time() - s0 < 0.002:
        pass
    ok(cu.cuEventRecord(event, None))
elapsed = time.monotonic() - v0
waits = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - waits0
os.write(1, f"gpu {elapsed}\nwaits {waits}\n".encode())
