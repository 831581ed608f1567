"""Unmodified torch 2.11.0 (CUDA 13 build) on emulated GPUs.

Skipped where the CUDA build of torch is not installed (`pip install -e .[device]`).
"""

import importlib.util

import pytest

from revati.device.spec import flat_lines, load_spec
from tests.host import HOST_DELAY_MS

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("pynvml") is None,
    reason="torch (CUDA build) and nvidia-ml-py not installed (pip install -e .[device])")

PROPS = """
import json, torch, pynvml
pynvml.nvmlInit()
out = {"available": torch.cuda.is_available(), "count": torch.cuda.device_count(), "devices": []}
for d in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(d)
    with torch.cuda.device(d):
        free, total = torch.cuda.mem_get_info()
    out["devices"].append({
        "name": torch.cuda.get_device_name(d), "cc": list(torch.cuda.get_device_capability(d)),
        "total": p.total_memory, "sms": p.multi_processor_count, "l2": p.L2_cache_size,
        "uuid": "GPU-" + str(p.uuid), "bus": p.pci_bus_id, "free": free, "mem_total": total})
out["nvml"] = [pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i))
               for i in range(pynvml.nvmlDeviceGetCount())]
print(json.dumps(out))
"""


@pytest.mark.parametrize("gpus", [1, 8])
def test_torch_sees_the_spec(emulated, gpus):
    spec = load_spec("h200_sxm")
    out = emulated.json(PROPS, gpus=gpus)
    assert out["available"] and out["count"] == gpus
    for i, dev in enumerate(out["devices"]):
        assert dev["name"] == spec.name
        assert tuple(dev["cc"]) == spec.compute_capability
        assert dev["total"] == dev["mem_total"] == spec.memory_bytes
        assert dev["sms"] == spec.sm_count and dev["l2"] == spec.l2_bytes
        assert dev["free"] == spec.memory_bytes - spec.context_reserved_bytes
        assert dev["uuid"] == out["nvml"][i] and dev["bus"] == spec.pci_bus_ids[i]


def test_torch_visible_devices_map_as_on_real_hardware(emulated):
    spec = load_spec("h200_sxm")
    out = emulated.json(PROPS, gpus=8, CUDA_VISIBLE_DEVICES="3,1")
    assert out["count"] == 2
    assert [d["uuid"] for d in out["devices"]] == [out["nvml"][3], out["nvml"][1]]
    assert [d["bus"] for d in out["devices"]] == [spec.pci_bus_ids[3], spec.pci_bus_ids[1]]


def test_hundred_gib_of_tensors_cost_no_ram_and_overflow_raises_oom(emulated):
    out = emulated.json("""
import json, torch
def rss():
    return int([l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].split()[1]) << 10
torch.zeros(1, device="cuda")
before = rss()
kept = [torch.zeros(10 << 30, dtype=torch.uint8, device="cuda") for _ in range(10)]
grew = rss() - before
try:
    torch.empty(60 << 30, dtype=torch.uint8, device="cuda")
    oom = False
except torch.OutOfMemoryError:
    oom = True
print(json.dumps({"grew": grew, "allocated": torch.cuda.memory_allocated(), "oom": oom}))
""")
    assert out["allocated"] == 100 << 30
    assert out["grew"] < 1 << 30
    assert out["oom"]


def test_torch_workloads_run(emulated):
    out = emulated.json("""
import json, torch
import torch.nn.functional as F
x = torch.arange(12, dtype=torch.float32).reshape(3, 4).cuda()
ran = {"roundtrip": x.cpu().flatten().tolist() == list(range(12))}
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    a = torch.randn(512, 1024, device="cuda", dtype=dtype)
    b = torch.randn(1024, 256, device="cuda", dtype=dtype)
    ran[str(dtype)] = tuple((a @ b).shape) == (512, 256)
q = torch.randn(2, 8, 128, 64, device="cuda", dtype=torch.bfloat16)
ran["sdpa"] = F.scaled_dot_product_attention(q, q, q, is_causal=True).shape == q.shape
w = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
inp = torch.randn(32, 256, device="cuda", dtype=torch.bfloat16)
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        torch.relu(inp @ w)
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    out = torch.relu(inp @ w) + 1
for _ in range(3):
    g.replay()
torch.cuda.synchronize()
ran["graph"] = out.shape == (32, 256)
print(json.dumps(ran))
""")
    assert out == {"roundtrip": True, "torch.float32": True, "torch.float16": True,
                   "torch.bfloat16": True, "sdpa": True, "graph": True}


def test_waiting_on_an_event_of_an_ended_capture_starts_no_capture(emulated):
    # SGLang 0.5.23's breakable CUDA graphs wait on events recorded in a segment's capture
    # after that capture has ended; the waiting stream must not count as capturing, or
    # torch's next RNG op on it fails ("RNG op during graph capture")
    out = emulated.json("""
import json, torch
side, ev, g = torch.cuda.Stream(), torch.cuda.Event(), torch.cuda.CUDAGraph()
x = torch.zeros(16, device="cuda")
with torch.cuda.graph(g):
    y = x * 2
    ev.record()
side.wait_event(ev)
with torch.cuda.stream(side):
    capturing = torch.cuda.is_current_stream_capturing()
    torch.empty(8, device="cuda").exponential_(1.0)
g.replay()
torch.cuda.synchronize()
print(json.dumps({"capturing": capturing}))
""")
    assert out == {"capturing": False}


def test_a_kernels_output_reads_zero_not_what_an_earlier_tensor_left(emulated):
    """PyTorch's caching allocator gives a freed block to the next tensor without the driver
    seeing it. A kernel's output there (argmax's token ids, SGLang's greedy sampling) read
    back what an earlier copy to the device had left: int32 pairs such as [128, 128] read as
    one int64 token id 0x8000000080, out of the vocabulary. Host data lasts until a kernel
    is handed it; what a kernel computes reads zero (token 0), in eager launches and graph
    replays alike, and host data no kernel was handed still round-trips."""
    out = emulated.json("""
import json, torch
def stale(n):   # host data copied into a block, the block freed (no kernel was handed it)
    g = torch.full((2 * n,), 128, dtype=torch.int32).cuda()
    p = g.data_ptr()
    del g
    return p
logits = torch.zeros(4, 1000, device="cuda")
p = stale(4)
ids = logits.argmax(-1)
out = {"reused": ids.data_ptr() == p, "eager": ids.tolist()}
# the same in a CUDA graph: its output buffer holds host data when the graph is replayed
static = torch.zeros(4, 1000, device="cuda")
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    static.argmax(-1)
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    gids = static.argmax(-1)
gids.copy_(torch.full((4,), 7, dtype=torch.int64))   # a device-to-device copy: host data
before = gids.tolist()
g.replay()
out["graph"] = [before, gids.tolist()]
# host data that no kernel was handed still reads back, through a device-to-device copy too
x = torch.arange(1000, 1016, dtype=torch.int64).cuda()
y = torch.empty_like(x)
y.copy_(x)
out["roundtrip"] = y.tolist() == list(range(1000, 1016))
print(json.dumps(out))
""")
    assert out["reused"], "the allocator did not reuse the block: the test proves nothing"
    assert out["eager"] == [0, 0, 0, 0]
    assert out["graph"] == [[7, 7, 7, 7], [0, 0, 0, 0]]
    assert out["roundtrip"]


@pytest.mark.parametrize("first", [
    'torch.full((64,), 128, dtype=torch.int32).cuda()',  # copied from the host
    'torch.empty(64, dtype=torch.int32, device="cuda")',  # never written, as vLLM's sampler's
], ids=["copied", "never-written"])
def test_a_kernels_output_over_blocks_of_several_copies_reads_zero_throughout(emulated, first):
    """A block that held two small tensors goes, once they are freed, to one larger tensor
    that a kernel makes. The kernel is handed the first tensor's address only; the second's
    copy from the host must not show through, whether the first tensor's bytes came from the
    host (its range is the kernel's then) or from nowhere (the kernel's pointer lies in no
    host-written range). Either read 0x8000000080 for half the ids before; vLLM read sampled
    token ids 2^30 and 2^32 + 1, out of the vocabulary, at 4 pipeline stages, and more at
    TP 4 x PP 2."""
    out = emulated.json(f"""
import json, torch
logits = torch.zeros(128, 1000, device="cuda")
a = {first}
b = torch.full((64,), 128, dtype=torch.int32).cuda()
p, adjacent = a.data_ptr(), b.data_ptr() == a.data_ptr() + 512
del a, b
ids = logits.argmax(-1)
print(json.dumps({{"reused": adjacent and ids.data_ptr() == p, "ids": sorted(set(ids.tolist()))}}))
""")
    assert out["reused"], "the allocator did not reuse the blocks: the test proves nothing"
    assert out["ids"] == [0]


D_NS = 2_000_000


def test_torch_time_follows_predicted_durations(emulated):
    out = emulated.json("""
import json, time, torch
x = torch.zeros(1024, device="cuda")
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(50):
    x.add_(1)
queued = time.perf_counter() - t0
torch.cuda.synchronize()
synced = time.perf_counter() - t0
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
for _ in range(5):  # 10 ms of work ahead of the events: a slow moment of the host does not
    x.add_(1)       # reach them (the stream stays busy while the host queues the rest)
start.record()
for _ in range(10):
    x.add_(1)
end.record()
end.synchronize()
elapsed_ms = start.elapsed_time(end)
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
torch.cuda.synchronize()
t0 = time.perf_counter()
with torch.cuda.stream(s1):
    for _ in range(25):
        x.add_(1)
with torch.cuda.stream(s2):
    y = torch.zeros(1024, device="cuda")
    for _ in range(25):
        y.add_(1)
torch.cuda.synchronize()
overlapped = time.perf_counter() - t0
print(json.dumps({"queued": queued, "synced": synced, "elapsed_ms": elapsed_ms,
                  "overlapped": overlapped}))
""", REVATI_PREDICT_FIXED_NS=str(D_NS))
    assert out["queued"] < 0.1 + emulated.stolen_s
    assert 0.100 <= out["synced"] < 0.100 + 0.08 + emulated.stolen_s
    # the kernels' 20 ms, plus the host's time between the start event and the first kernel
    assert 20.0 <= out["elapsed_ms"] < 20.0 + HOST_DELAY_MS + 1e3 * emulated.stolen_s
    assert 0.050 <= out["overlapped"] < 0.100 + emulated.stolen_s  # two 50 ms streams overlap


@pytest.mark.e2e
def test_triton_kernel_compiles_and_launches(emulated):
    out = emulated.json("""
import json, torch, triton, triton.language as tl
@triton.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)
x = torch.randn(100000, device="cuda"); out = torch.empty_like(x)
k = add[(triton.cdiv(x.numel(), 1024),)](x, x, out, x.numel(), BLOCK=1024)
torch.cuda.synchronize()
print(json.dumps({"target": str(triton.runtime.driver.active.get_current_target().arch),
                  "cubin": "cubin" in k.asm}))
""", timeout=600)
    assert out == {"target": "90", "cubin": True}


def test_fp8_matmul_and_torch_compile_run(emulated):
    """An fp8 GEMM through cuBLASLt (torch._scaled_mm) and torch.compile of a small model
    (Inductor generates Triton kernels, compiled for sm_90 here and launched on the shim)."""
    out = emulated.json("""
import json, torch
a = torch.randn(256, 512, device="cuda").to(torch.float8_e4m3fn)
b = torch.randn(256, 512, device="cuda").to(torch.float8_e4m3fn)
one = torch.tensor(1.0, device="cuda")
c = torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 8))
model = torch.compile(model.cuda())
y = model(torch.randn(16, 64, device="cuda"))
torch.cuda.synchronize()
print(json.dumps({"fp8": list(c.shape), "compiled": list(y.shape)}))
""", timeout=600)
    assert out == {"fp8": [256, 256], "compiled": [16, 8]}


def test_compute_bound_work_slows_down_at_the_power_limit(emulated):
    """Back-to-back compute-bound GEMMs heat the emulated H200 to its power limit and then take
    the measured sustained slowdown times their cold duration; memory-bound GEMMs keep their
    speed; after a second of idling the GPU is cold again (revati/conf/hardware/h200_sxm.yaml
    sustained_power)."""
    power = load_spec("h200_sxm").sustained_power
    out = emulated.json("""
import json, statistics, time, torch
F = torch.nn.functional
def series(m, n, k=4096, out=28672):
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(out, k, device="cuda", dtype=torch.bfloat16)
    F.linear(x, w)
    torch.cuda.synchronize()
    time.sleep(1.0)
    evs = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); F.linear(x, w); b.record(); evs.append((a, b))
    torch.cuda.synchronize()
    return [a.elapsed_time(b) for a, b in evs]
def cold(t):  # [0] also holds the host's time to queue it. A slow moment of the host
    return min(t[1:4])  # between two launches can idle the GPU inside a pair of events and
                        # only lengthen it; 2.4 ms of work leaves the GPU cold (constant 42 ms)
def hot(t):
    return statistics.median(t[-50:])
heated = series(2048, 800)
again = series(2048, 5)
cool = series(16, 400, 16384, 57344)  # 1.9 GB of weights a call: long enough to queue
print(json.dumps({"first": cold(heated), "last": hot(heated), "again": cold(again),
                  "mem_first": cold(cool), "mem_last": hot(cool)}))
""")
    assert out["last"] / out["first"] == pytest.approx(power["gemm_slowdown"], rel=0.01)
    assert out["again"] == pytest.approx(out["first"], rel=0.01), out
    assert out["mem_last"] / out["mem_first"] == pytest.approx(1.0, abs=0.01)


def test_memory_bound_work_between_gemms_keeps_the_gpu_at_its_power_limit(emulated, tmp_path):
    """A GPU that fills the time between compute-bound GEMMs with memory-bound ones (a serving
    GPU's decode steps between its prefills) holds a power state of d + (1 - d) * memory_load,
    d the GEMMs' share of the time, and the GEMMs slow by the throttle of that state: memory-
    bound work draws power where an idle GPU draws none. The H200's spec leaves memory_load
    unmeasured (0); this H200 takes 0.5, about what the H100 drew (validation/calibration/
    power-memory-bound), where 0 would leave these GEMMs at their cold speed."""
    spec = load_spec("h200_sxm")
    power = {**spec.sustained_power, "memory_load": 0.5}
    lines = [line for line in flat_lines(spec) if not line.startswith("power.memory_load ")]
    variant = tmp_path / "h200_memory_load.spec"
    variant.write_text("\n".join([*lines, "power.memory_load 0.5"]) + "\n")
    out = emulated.json("""
import json, statistics, time, torch
F = torch.nn.functional
x, w = torch.randn(2048, 4096, device="cuda", dtype=torch.bfloat16), \\
    torch.randn(28672, 4096, device="cuda", dtype=torch.bfloat16)
xs, ws = torch.randn(16, 16384, device="cuda", dtype=torch.bfloat16), \\
    torch.randn(57344, 16384, device="cuda", dtype=torch.bfloat16)
def timed(fn):  # cold: after a second idle; [0] also holds the host's time to queue it
    fn()
    torch.cuda.synchronize()
    time.sleep(1.0)
    evs = []
    for _ in range(4):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); evs.append((a, b))
    torch.cuda.synchronize()
    return min(a.elapsed_time(b) for a, b in evs[1:])
gemm, fill = timed(lambda: F.linear(x, w)), timed(lambda: F.linear(xs, ws))
torch.cuda.synchronize()
time.sleep(1.0)
evs = []
for _ in range(600):  # ~0.6 s, ~14 power time constants, no idle gap
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(); F.linear(x, w); b.record(); F.linear(xs, ws); evs.append((a, b))
torch.cuda.synchronize()
print(json.dumps({"gemm": gemm, "fill": fill,
                  "steady": statistics.median(a.elapsed_time(b) for a, b in evs[-100:])}))
""", REVATI_HW_SPEC=str(variant))
    duty = out["steady"] / (out["steady"] + out["fill"])
    state = duty + (1 - duty) * power["memory_load"]
    throttle = min(1.0, max(0.0, (state - power["throttle_onset"])
                            / (power["throttle_full"] - power["throttle_onset"])))
    assert out["steady"] / out["gemm"] == pytest.approx(
        1 + (power["gemm_slowdown"] - 1) * throttle, rel=0.01), out
