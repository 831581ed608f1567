"""`revati bench --gpu-trace`: the deployment's processes write their GPU work, merged into
one Chrome trace when the deployment closes."""

import itertools
import json
import sys

from revati.bench.deployment import Deployment
from revati.device.env import emulated_device_env
from revati.timewarp.runner import emulated_env

PROGRAM = """
import ctypes
cu = ctypes.CDLL("libcuda.so.1")
c = ctypes.c_void_p
assert cu.cuInit(0) == 0
ctx, mod, fn = c(), c(), c()
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0 and cu.cuCtxSetCurrent(ctx) == 0
assert cu.cuModuleLoadData(ctypes.byref(mod), b"not parsed") == 0
assert cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"_Z6kernelv") == 0
for _ in range(5):
    assert cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, None, None, None) == 0
assert cu.cuCtxSynchronize() == 0
"""


def test_a_deployment_writes_its_processes_gpu_work_as_one_trace(tmp_path):
    trace, log = tmp_path / "gpu_trace.json", tmp_path / "program.log"
    dep = Deployment(cores=0, trace=trace)
    try:
        env = emulated_env(dep.tk.segment, "warn",
                           emulated_device_env("h200_sxm", 1, tmp_path / "device"))
        env["REVATI_PREDICT_FIXED_NS"] = "3000000"
        pid = dep.spawn([sys.executable, "-c", PROGRAM], env, log)
        dep.wait(pid, None, "the program", 60.0, log)
    finally:
        dep.close()
    events = json.loads(trace.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("ph") == "X" and str(e.get("tid")).startswith("GPU0")]
    assert len(kernels) == 5 and all(e["dur"] == 3000 for e in kernels)  # microseconds
    starts = sorted(e["ts"] for e in kernels)
    assert all(b - a == 3000 for a, b in itertools.pairwise(starts))  # back to back
    assert not trace.with_suffix(".parts").exists()
