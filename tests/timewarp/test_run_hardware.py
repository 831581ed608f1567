"""`revati run --hardware NAME --gpus N`: the command sees emulated GPUs in virtual time."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.timewarp.conftest import revati_run, run_py


def test_unknown_hardware_is_a_one_line_error() -> None:
    r = revati_run(["true"], run_opts=["--hardware", "h999"])
    assert r.returncode == 2
    assert "unknown hardware 'h999'" in r.stderr and "h200_sxm" in r.stderr


def test_too_many_gpus_for_a_node() -> None:
    r = revati_run(["true"], run_opts=["--hardware", "h200_sxm", "--gpus", "9"])
    assert r.returncode == 2
    assert "gpus must be 1..8" in r.stderr


def test_torch_sees_the_emulated_node_and_gemms_take_virtual_time() -> None:
    pytest.importorskip("torch")
    r = run_py("""
        import json, time, torch
        a = torch.empty(4096, 4096, device="cuda:1", dtype=torch.bfloat16)
        torch.cuda.synchronize(1)
        t = time.perf_counter()
        for _ in range(50):
            b = a @ a
        queued = time.perf_counter() - t
        torch.cuda.synchronize(1)
        print(json.dumps({"n": torch.cuda.device_count(), "name": torch.cuda.get_device_name(1),
                          "queued": queued, "total": time.perf_counter() - t}))
    """, run_opts=["--hardware", "h200_sxm", "--gpus", "2"], timeout=300)
    assert r.returncode == 0, r.stderr
    out = r.json()
    assert out["n"] == 2 and "H200" in out["name"]
    # 50 GEMMs of 137 GFLOP cannot take less than 50 * 137e9 / 989e12 s (dense bf16 peak)
    assert out["total"] >= 50 * 2 * 4096**3 / 989e12
    assert out["total"] > out["queued"]  # launches return at once; synchronize waits


def test_trace_has_gpu_work_of_forked_processes(tmp_path) -> None:
    """Each process writes its own trace events, also a child forked from a process that
    traced already: the merged trace is valid JSON with kernels from both."""
    pytest.importorskip("torch")
    trace = tmp_path / "trace.json"
    r = run_py("""
        import json, os, torch
        a = torch.empty(1024, 1024, device="cuda")
        (a @ a).sum(); torch.cuda.synchronize()
        if os.fork() == 0:
            (a @ a).sum(); torch.cuda.synchronize()
            os._exit(0)
        os.wait()
        print(json.dumps({"parent": os.getpid()}))
    """, run_opts=["--hardware", "h200_sxm", "--trace", str(trace)], timeout=300)
    assert r.returncode == 0, r.stderr
    events = json.loads(trace.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("ph") == "X" and e.get("pid") != 0]
    assert len({e["pid"] for e in kernels}) == 2
    assert all(e["dur"] > 0 for e in kernels)


def test_doctor_lists_what_the_last_run_called_that_is_not_implemented() -> None:
    r = run_py("""
        import ctypes, json
        rc = ctypes.CDLL("libcuda.so.1").cuGraphAddBatchMemOpNode(None, None, None, 0, None)
        print(json.dumps({"rc": rc}))
    """, run_opts=["--hardware", "h200_sxm"])
    assert r.returncode == 0, r.stderr
    assert r.json()["rc"] != 0  # an error, never a silent success
    doctor = subprocess.run([sys.executable, "-m", "revati.cli.main", "doctor", "--last-run"],
                            capture_output=True, text=True)
    assert doctor.returncode == 0
    assert ("CUDA driver entry point not implemented: cuGraphAddBatchMemOpNode (in 1 process)"
            in doctor.stdout)
