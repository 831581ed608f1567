"""GPU work under a Timekeeper (`revati run`): host synchronisation is a time-warp wait."""

import json
import shutil
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.e2e

PROGRAM = """
import json, time, torch
x = torch.zeros(1024, device="cuda"); torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(500):
    x.add_(1)
torch.cuda.synchronize()
virtual = time.perf_counter() - t0
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    x.mul_(2)
s.synchronize()
print(json.dumps({"virtual": virtual}))
"""


def test_synchronize_jumps_virtual_time_and_traces_each_stream(emulated, tmp_path):
    revati = shutil.which("revati", path=str(sys.prefix) + "/bin")
    script = tmp_path / "warp.py"
    script.write_text(PROGRAM)
    trace = tmp_path / "trace.json"
    env = emulated.env(REVATI_PREDICT_FIXED_NS=str(40_000_000))  # 500 x 40 ms = 20 s of GPU
    start = time.monotonic()
    proc = subprocess.run([revati, "run", "--trace", str(trace), "--", sys.executable, str(script)],
                          env=env, capture_output=True, text=True, timeout=300)
    wall = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr[-3000:]
    virtual = json.loads(proc.stdout.strip().splitlines()[-1])["virtual"]
    assert 20.0 <= virtual < 20.0 + 0.5
    assert wall < virtual  # the 20 s of GPU time were jumped over, not slept
    events = json.loads(trace.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    kernels = [e for e in events if e.get("ph") == "X" and str(e.get("tid")).startswith("GPU0")]
    assert {e["tid"] for e in kernels} >= {"GPU0 default stream"}
    assert len({e["tid"] for e in kernels}) == 2  # the legacy stream and the side stream
    assert sum(e["dur"] for e in kernels) >= 500 * 40_000  # trace durations in microseconds


GEMMS = """
import torch
a = torch.randn(512, 1024, device="cuda", dtype=torch.bfloat16)
b = torch.randn(1024, 256, device="cuda", dtype=torch.bfloat16)
a @ b
lin = torch.nn.Linear(1024, 384, device="cuda", dtype=torch.float16)
lin(torch.randn(64, 1024, device="cuda", dtype=torch.float16))
torch.bmm(torch.randn(8, 64, 32, device="cuda"), torch.randn(8, 32, 16, device="cuda"))
torch.cuda.synchronize()
"""


def test_cublas_kernels_carry_their_gemm_shapes(emulated, tmp_path):
    revati = shutil.which("revati", path=str(sys.prefix) + "/bin")
    script = tmp_path / "gemms.py"
    script.write_text(GEMMS)
    trace = tmp_path / "trace.json"
    proc = subprocess.run([revati, "run", "--trace", str(trace), "--", sys.executable, str(script)],
                          env=emulated.env(REVATI_PREDICT_FIXED_NS="1000"), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = json.loads(trace.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    shapes = [(e["args"]["m"], e["args"]["n"], e["args"]["k"], e["args"]["batch"])
              for e in events if e.get("ph") == "X" and "m" in e.get("args", {})]
    # cuBLAS is column-major: torch's (512x1024) @ (1024x256) is m=256, n=512, k=1024
    assert shapes == [(256, 512, 1024, 1), (384, 64, 1024, 1), (16, 64, 32, 8)]
