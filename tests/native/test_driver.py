"""The emulated CUDA driver and NVML through their C APIs (ctypes), without torch."""

import importlib.util

import pytest

from revati.device.spec import load_spec
from tests.host import HOST_DELAY, HOST_DELAY_MS

# Prelude of every program: the driver, a context on device 0, and small helpers.
PRELUDE = """
import ctypes, json, os, sys, time
cu = ctypes.CDLL("libcuda.so.1")
c = ctypes.c_void_p
def ok(r):
    assert r == 0, f"CUDA error {r}"
def init():
    ok(cu.cuInit(0))
    ctx = c()
    ok(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0))
    ok(cu.cuCtxSetCurrent(ctx))
def kernel(name=b"_Z6kernelv"):
    mod, fn = c(), c()
    ok(cu.cuModuleLoadData(ctypes.byref(mod), b"not parsed"))
    ok(cu.cuModuleGetFunction(ctypes.byref(fn), mod, name))
    return fn
def launch(fn, stream=None, n=1):
    s = stream if isinstance(stream, c) else c(stream)
    for _ in range(n):
        ok(cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, None, None))
def stream(flags=0):
    s = c()
    ok(cu.cuStreamCreate(ctypes.byref(s), flags))
    return s
def free():
    f, t = ctypes.c_size_t(), ctypes.c_size_t()
    ok(cu.cuMemGetInfo_v2(ctypes.byref(f), ctypes.byref(t)))
    return f.value
"""


def driver(emulated, body: str, **kw):
    return emulated.json(PRELUDE + body, **kw)


needs_pynvml = pytest.mark.skipif(importlib.util.find_spec("pynvml") is None,
                                  reason="nvidia-ml-py not installed (pip install -e .[device])")


IDENTITY = """
init() if os.environ.get("CUDA_VISIBLE_DEVICES") != "" else None
import pynvml
n = ctypes.c_int()
r = cu.cuDeviceGetCount(ctypes.byref(n))
out = {"count": n.value, "devices": []}
for d in range(n.value):
    name = ctypes.create_string_buffer(128); bus = ctypes.create_string_buffer(32)
    uuid = (ctypes.c_ubyte * 16)()
    ok(cu.cuDeviceGetName(name, 128, d)); ok(cu.cuDeviceGetPCIBusId(bus, 32, d))
    ok(cu.cuDeviceGetUuid_v2(uuid, d))
    u = bytes(uuid).hex()
    out["devices"].append({"name": name.value.decode(), "bus": bus.value.decode(),
                           "uuid": f"GPU-{u[:8]}-{u[8:12]}-{u[12:16]}-{u[16:20]}-{u[20:]}"})
pynvml.nvmlInit()
out["nvml"] = []
for i in range(pynvml.nvmlDeviceGetCount()):
    h = pynvml.nvmlDeviceGetHandleByIndex(i)
    out["nvml"].append({"name": pynvml.nvmlDeviceGetName(h), "uuid": pynvml.nvmlDeviceGetUUID(h),
                        "bus": pynvml.nvmlDeviceGetPciInfo(h).busId,
                        "mem": pynvml.nvmlDeviceGetMemoryInfo(h).total,
                        "cc": pynvml.nvmlDeviceGetCudaComputeCapability(h)})
print(json.dumps(out))
"""


@needs_pynvml
@pytest.mark.parametrize("gpus", [1, 8])
def test_driver_and_nvml_report_the_node(emulated, gpus):
    out = driver(emulated, IDENTITY, gpus=gpus)
    assert out["count"] == gpus == len(out["nvml"])
    for dev, nv in zip(out["devices"], out["nvml"], strict=True):
        assert dev["name"] == nv["name"] == "NVIDIA H200"
        assert dev["uuid"] == nv["uuid"] and dev["bus"] == nv["bus"]
        assert nv["mem"] == load_spec("h200_sxm").nvml_memory_bytes and nv["cc"] == [9, 0]
    assert len({d["uuid"] for d in out["devices"]}) == gpus


@needs_pynvml
def test_visible_devices_reorder_and_renumber_like_the_real_driver(emulated):
    out = driver(emulated, IDENTITY, gpus=8, CUDA_VISIBLE_DEVICES="3,1")
    assert out["count"] == 2 and len(out["nvml"]) == 8  # NVML ignores the variable
    assert out["devices"][0]["uuid"] == out["nvml"][3]["uuid"]
    assert out["devices"][1]["bus"] == out["nvml"][1]["bus"]


@needs_pynvml
def test_visible_devices_by_uuid_and_truncated_at_an_invalid_entry(emulated):
    full = driver(emulated, IDENTITY, gpus=4)
    uuid = full["nvml"][2]["uuid"]
    out = driver(emulated, IDENTITY, gpus=4, CUDA_VISIBLE_DEVICES=f"{uuid},bogus,0")
    assert [d["uuid"] for d in out["devices"]] == [uuid]


def test_empty_visible_devices_means_no_device(emulated):
    out = driver(emulated, "print(json.dumps({'init': cu.cuInit(0)}))", gpus=2,
                 CUDA_VISIBLE_DEVICES="")
    assert out["init"] == 100  # CUDA_ERROR_NO_DEVICE


def test_unimplemented_entry_point_logs_its_name_once_and_fails(emulated):
    proc = emulated.run(PRELUDE + """
init()
arr = c()
r1 = cu.cuArrayCreate_v2(ctypes.byref(arr), None)
r2 = cu.cuArrayCreate_v2(ctypes.byref(arr), None)
print(json.dumps([r1, r2]))
""")
    assert proc.stdout.strip().splitlines()[-1] == "[801, 801]"  # CUDA_ERROR_NOT_SUPPORTED
    assert proc.stderr.count("cuArrayCreate_v2") == 1


def test_proc_address_honours_api_versions(emulated):
    out = driver(emulated, """
def proc(name, ver, flags=0):
    p = c()
    r = cu.cuGetProcAddress_v2(name, ctypes.byref(p), ver, ctypes.c_uint64(flags), None)
    return r, p.value
own = lambda n: ctypes.cast(getattr(cu, n), c).value
print(json.dumps({
    "v3": proc(b"cuStreamGetCaptureInfo", 12030)[1] == own("cuStreamGetCaptureInfo_v3"),
    "v2": proc(b"cuStreamGetCaptureInfo", 11030)[1] == own("cuStreamGetCaptureInfo_v2"),
    "ptsz": proc(b"cuLaunchKernel", 13000, 2)[1] == own("cuLaunchKernel_ptsz"),
    "legacy": proc(b"cuLaunchKernel", 13000, 1)[1] == own("cuLaunchKernel"),
    "too_old": proc(b"cuStreamGetCaptureInfo", 9000)[0],
    "unknown": proc(b"cuNoSuchThing", 13000)[0]}))
""")
    assert out == {"v3": True, "v2": True, "ptsz": True, "legacy": True,
                   "too_old": 500, "unknown": 500}  # CUDA_ERROR_NOT_FOUND


def test_host_data_round_trips_and_memory_accounting(emulated):
    out = driver(emulated, """
init()
free0, total = ctypes.c_size_t(), ctypes.c_size_t()
ok(cu.cuMemGetInfo_v2(ctypes.byref(free0), ctypes.byref(total)))
data = os.urandom(1 << 20)
dp = ctypes.c_uint64()
ok(cu.cuMemAlloc_v2(ctypes.byref(dp), len(data)))
ok(cu.cuMemcpyHtoD_v2(dp, data, len(data)))
back = ctypes.create_string_buffer(len(data))
ok(cu.cuMemcpyDtoH_v2(back, dp, len(data)))
free1 = ctypes.c_size_t()
ok(cu.cuMemGetInfo_v2(ctypes.byref(free1), ctypes.byref(total)))
too_big = cu.cuMemAlloc_v2(ctypes.byref(ctypes.c_uint64()), ctypes.c_size_t(total.value))
ok(cu.cuMemFree_v2(dp))
print(json.dumps({"same": back.raw == data, "total": total.value, "free0": free0.value,
                  "used": free0.value - free1.value, "oom": too_big}))
""")
    assert out["same"]
    assert out["total"] == load_spec("h200_sxm").memory_bytes
    assert out["free0"] == out["total"] - load_spec("h200_sxm").context_reserved_bytes
    assert out["used"] == 2 << 20  # the first small allocation opens a 2 MiB page
    assert out["oom"] == 2  # CUDA_ERROR_OUT_OF_MEMORY


def test_pointer_queries_find_each_allocation_among_many(emulated):
    """cuPointerGetAttributes and cuMemGetAddressRange answer for every byte of each of
    hundreds of device allocations and pinned host ranges (looked up by binary search), and
    only for those: not for freed memory, pageable memory or the gaps between; registering
    memory that overlaps a registered range is refused, as the real driver refuses it."""
    out = driver(emulated, """
init()
MEMORY_TYPE, RANGE_START, RANGE_SIZE = 2, 11, 12
def attrs(p):
    kind, start, size = ctypes.c_uint(), ctypes.c_uint64(), ctypes.c_size_t()
    which = (ctypes.c_int * 3)(MEMORY_TYPE, RANGE_START, RANGE_SIZE)
    data = (c * 3)(ctypes.cast(ctypes.byref(kind), c), ctypes.cast(ctypes.byref(start), c),
                   ctypes.cast(ctypes.byref(size), c))
    ok(cu.cuPointerGetAttributes(3, which, data, ctypes.c_uint64(p)))
    return kind.value, start.value, size.value
dev = []
for i in range(300):
    p = ctypes.c_uint64()
    ok(cu.cuMemAlloc_v2(ctypes.byref(p), 4096 * (1 + i % 7)))
    dev.append((p.value, 4096 * (1 + i % 7)))
for p, n in dev[::2]:
    ok(cu.cuMemFree_v2(ctypes.c_uint64(p)))
kept, freed = dev[1::2], dev[::2]
host = []
for i in range(300):
    p = c()
    ok(cu.cuMemHostAlloc(ctypes.byref(p), 1000 + i, 0))
    host.append((p.value, 1000 + i))
for p, n in host[::3]:
    ok(cu.cuMemFreeHost(c(p)))
pinned = [h for i, h in enumerate(host) if i % 3]
page = ctypes.create_string_buffer(1 << 16)
base = ctypes.addressof(page)
reg = cu.cuMemHostRegister_v2(c(base + 4096), ctypes.c_size_t(8192), 0)
overlaps = [cu.cuMemHostRegister_v2(c(base + a), ctypes.c_size_t(n), 0)
            for a, n in ((0, 8192), (8192, 8192), (4096, 8192), (0, 1 << 16))]
beside = cu.cuMemHostRegister_v2(c(base + 12288), ctypes.c_size_t(4096), 0)
ranges = {"device": all(attrs(p + k) == (2, p, n) for p, n in kept for k in (0, n // 2, n - 1)),
          "host": all(attrs(p + k) == (1, p, n) for p, n in pinned for k in (0, n - 1)),
          "registered": attrs(base + 4096 + 5000) == (1, base + 4096, 8192),
          "freed": [attrs(p)[0] for p, n in freed[1:4]] + [attrs(p)[0] for p, n in host[3:9:3]],
          "pageable": [attrs(base)[0], attrs(base + 16384)[0]],
          "beside": attrs(base + 12288 + 100) == (1, base + 12288, 4096)}
size = ctypes.c_size_t(); start = ctypes.c_uint64()
ranges["address_range"] = [cu.cuMemGetAddressRange_v2(ctypes.byref(start), ctypes.byref(size),
                                                       ctypes.c_uint64(kept[5][0] + 100)),
                           (start.value, size.value) == kept[5],
                           cu.cuMemGetAddressRange_v2(ctypes.byref(start), ctypes.byref(size),
                                                      ctypes.c_uint64(freed[5][0]))]
ranges["register"] = [reg, overlaps, beside, cu.cuMemHostUnregister(c(base + 4096)),
                      cu.cuMemHostUnregister(c(base + 4096)), attrs(base + 4096)[0]]
print(json.dumps(ranges))
""")
    assert out["device"] and out["host"] and out["registered"]
    assert out["freed"] == [0] * 5 and out["pageable"] == [0, 0] and out["beside"]
    assert out["address_range"] == [0, True, 500]  # CUDA_ERROR_NOT_FOUND
    # 712: CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, 713: ..._NOT_REGISTERED
    assert out["register"] == [0, [712] * 4, 0, 0, 713, 0]


def test_hundred_gib_of_allocations_cost_no_ram(emulated):
    out = driver(emulated, """
init()
def rss():
    return int([l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].split()[1]) << 10
before = rss()
ptrs = []
for _ in range(10):
    p = ctypes.c_uint64()
    ok(cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(10 << 30)))
    ok(cu.cuMemsetD8_v2(p, 0, ctypes.c_size_t(10 << 30)))
    ptrs.append(p)
print(json.dumps({"grew": rss() - before}))
""")
    assert out["grew"] < 1 << 30


D_NS = 2_000_000  # predicted duration of every operation in the timing tests


def timed(emulated, body: str, **kw):
    return driver(emulated, "init()\nfn = kernel()\n" + body, REVATI_PREDICT_FIXED_NS=str(D_NS),
                  **kw)


def test_synchronize_waits_for_queued_kernels(emulated):
    out = timed(emulated, """
t0 = time.perf_counter()
launch(fn, n=50)
queued = time.perf_counter() - t0
busy = cu.cuStreamQuery(None)
ok(cu.cuCtxSynchronize())
print(json.dumps({"queued": queued, "total": time.perf_counter() - t0, "busy": busy,
                  "idle": cu.cuStreamQuery(None)}))
""")
    assert out["queued"] < 0.05 + emulated.stolen_s  # launching does not wait
    assert out["busy"] == 600 and out["idle"] == 0  # CUDA_ERROR_NOT_READY, then done
    assert 0.100 <= out["total"] < 0.100 + 0.05 + emulated.stolen_s


def test_two_streams_overlap_and_an_event_joins_them(emulated):
    out = timed(emulated, """
s1, s2 = stream(1), stream(1)   # non-blocking streams: independent timelines
t0 = time.perf_counter()
launch(fn, s1, 25); launch(fn, s2, 25)
ok(cu.cuCtxSynchronize())
overlap = time.perf_counter() - t0
ev = c()
ok(cu.cuEventCreate(ctypes.byref(ev), 0))
t0 = time.perf_counter()
launch(fn, s1, 25)
ok(cu.cuEventRecord(ev, s1))
ok(cu.cuStreamWaitEvent(s2, ev, 0))
launch(fn, s2, 25)
ok(cu.cuStreamSynchronize(s2))
joined = time.perf_counter() - t0
print(json.dumps({"overlap": overlap, "joined": joined}))
""")
    assert 0.050 <= out["overlap"] < 0.050 + 0.04 + emulated.stolen_s
    assert 0.100 <= out["joined"] < 0.100 + 0.04 + emulated.stolen_s


def test_legacy_stream_serialises_with_blocking_streams_only(emulated):
    out = timed(emulated, """
blocking, nonblocking = stream(0), stream(1)
t0 = time.perf_counter()
launch(fn, blocking, 25); launch(fn, None, 1)
ok(cu.cuStreamSynchronize(None))
after_blocking = time.perf_counter() - t0
t0 = time.perf_counter()
launch(fn, nonblocking, 25); launch(fn, None, 1)
ok(cu.cuStreamSynchronize(None))
after_nonblocking = time.perf_counter() - t0
ok(cu.cuCtxSynchronize())
print(json.dumps({"blocking": after_blocking, "nonblocking": after_nonblocking}))
""")
    assert out["blocking"] >= 0.052
    assert out["nonblocking"] < 0.030 + emulated.stolen_s


def test_event_elapsed_time_is_the_timeline_difference(emulated):
    out = timed(emulated, """
a, b = c(), c()
ok(cu.cuEventCreate(ctypes.byref(a), 0)); ok(cu.cuEventCreate(ctypes.byref(b), 0))
s = stream()
ok(cu.cuEventRecord(a, s)); launch(fn, s, 10); ok(cu.cuEventRecord(b, s))
early = cu.cuEventQuery(b)
ok(cu.cuEventSynchronize(b))
ms = ctypes.c_float()
ok(cu.cuEventElapsedTime_v2(ctypes.byref(ms), a, b))
print(json.dumps({"ms": ms.value, "early": early}))
""")
    assert out["early"] == 600
    # ten 2 ms kernels, plus the host's time between recording a and the first launch (the
    # stream idle, that launch starts when it is made): 2.1 ms with a busy process on the core
    assert 20.0 <= out["ms"] < 20.0 + HOST_DELAY_MS + 1e3 * emulated.stolen_s


def test_a_full_launch_queue_blocks_the_launching_thread(emulated):
    """The H200 holds 1,021 launches per stream (validation/calibration/launch-queue/): launch
    1,021 + n waits until the GPU has started launch n; event records take no room, and
    another stream's queue is its own."""
    queue = load_spec("h200_sxm").launch_queue
    out = timed(emulated, f"""
s, other = stream(1), stream(1)
ev = c()
ok(cu.cuEventCreate(ctypes.byref(ev), 0))
t0 = time.perf_counter()
launch(fn, s, {queue})
for _ in range(100):
    ok(cu.cuEventRecord(ev, s))
filled = time.perf_counter() - t0
launch(fn, other, 10)
beside = time.perf_counter() - t0 - filled
launch(fn, s, 50)
print(json.dumps({{"filled": filled, "beside": beside, "more": time.perf_counter() - t0}}))
""")
    assert queue == 1021
    # another stream's launches do not wait behind the full queue (they would for ~2 s)
    assert out["filled"] < 0.05 + emulated.stolen_s
    assert out["beside"] < HOST_DELAY + emulated.stolen_s
    # the 50th launch past a full queue waits for the 50th queued kernel to start: 49 x 2 ms
    assert 0.098 <= out["more"] < 0.098 + 0.03 + emulated.stolen_s


LAZY = """
s = stream(1)
other = kernel(b"_Z5otherv")
launch(fn, s, 25)              # fn's first launch: loaded at once, the device being idle
t0 = time.perf_counter()
launch(fn, s, 25)
queued = time.perf_counter() - t0
state = ctypes.c_int()
ok(cu.cuFuncIsLoaded(ctypes.byref(state), other))
before = state.value
launch(other, s, 1)            # its first launch waits for the 50 queued kernels
waited = time.perf_counter() - t0
ok(cu.cuFuncIsLoaded(ctypes.byref(state), other))
mode = ctypes.c_int()
ok(cu.cuModuleGetLoadingMode(ctypes.byref(mode)))
ok(cu.cuCtxSynchronize())
print(json.dumps({"queued": queued, "waited": waited, "before": before, "after": state.value,
                  "mode": mode.value}))
"""


@pytest.mark.parametrize("loading", ["", "EAGER"])
def test_a_kernel_s_first_launch_waits_for_the_device_under_lazy_loading(emulated, loading):
    out = timed(emulated, LAZY, CUDA_MODULE_LOADING=loading)
    # host time only, against the 0.1 s that waiting for the queued kernels takes
    assert out["queued"] < HOST_DELAY + emulated.stolen_s
    if loading == "EAGER":  # CU_MODULE_EAGER_LOADING: every kernel loaded with its module
        assert out["mode"] == 1 and out["before"] == out["after"] == 1
        assert out["waited"] < HOST_DELAY + emulated.stolen_s
    else:  # CU_MODULE_LAZY_LOADING, the default: unloaded until launched
        assert out["mode"] == 2 and (out["before"], out["after"]) == (0, 1)
        # 50 kernels of 2 ms (the first 25 began up to ~0.1 ms before t0), then ~0.1 ms to load
        assert 0.0999 <= out["waited"] < 0.1002 + HOST_DELAY + emulated.stolen_s


DILATED = """
a, b, mark = c(), c(), c()
for e in (a, b, mark):
    ok(cu.cuEventCreate(ctypes.byref(e), 0))
spun = 0.0  # real time the stretches took: their CPU time, and more where a busy host
late = 0.0  # shares the core (no Timekeeper here: the clock is real); how late plain sleeps
slept = 0.0  # beside the dilation's sleeps woke: what waking costs on this host right now
ok(cu.cuEventRecord(a, None))
for _ in range(STRETCHES):  # 100 ms of this thread's CPU in all, a GPU call after each stretch
    c0, w0 = time.thread_time(), time.perf_counter()
    while time.thread_time() - c0 < 0.1 / STRETCHES:
        pass
    spun += time.perf_counter() - w0
    ok(cu.cuEventRecord(mark, None))
    w0 = time.perf_counter()
    time.sleep(0.002)
    slept += time.perf_counter() - w0
    late += time.perf_counter() - w0 - 0.002
ok(cu.cuEventRecord(b, None)); ok(cu.cuEventSynchronize(b))
ms = ctypes.c_float()
ok(cu.cuEventElapsedTime_v2(ctypes.byref(ms), a, b))
print(json.dumps({"ms": ms.value, "dilated_ms": ms.value - 1e3 * (spun + slept),
                  "late_ms": 1e3 * late}))
"""


@pytest.mark.parametrize("dilation", ["", "2", "3.5"])
def test_cpu_dilation_makes_a_gpu_thread_pay_its_cpu_time_that_many_times(emulated, dilation):
    # 50 stretches of 2 ms between GPU calls: launch work, all of it dilated
    out = timed(emulated, "STRETCHES = 50\n" + DILATED, REVATI_CPU_DILATION=dilation)
    factor = float(dilation or 1)
    # the time the GPU calls added beyond the stretches themselves is the dilation's debt,
    # (factor - 1) x 100 ms, plus the calls' own work and how late each of the dilation's
    # 50 sleeps woke. A busy core wakes a sleeper milliseconds late (353 ms read at 3.5 in a
    # pinned stress run), so plain sleeps beside them measure that lateness as it is now,
    # and twice it bounds theirs
    debt = 100 * (factor - 1)
    assert debt - 1 <= out["dilated_ms"] < (debt + 2 * out["late_ms"] + HOST_DELAY_MS
                                           + 1e3 * emulated.stolen_s)


def test_cpu_dilation_counts_at_most_5_ms_of_one_stretch(emulated):
    """100 ms of CPU with no GPU call in between (a scheduler polling for requests) is not
    launch work: only its first 5 ms are dilated."""
    out = timed(emulated, "STRETCHES = 1\n" + DILATED, REVATI_CPU_DILATION="3.5")
    assert 5 * 2.5 - 1 <= out["dilated_ms"] < 5 * 2.5 + HOST_DELAY_MS + 1e3 * emulated.stolen_s


@pytest.mark.parametrize("bad", ["0.05", "fast", "1.5x"])
def test_cpu_dilation_rejects_what_it_cannot_apply(emulated, bad):
    proc = emulated.run(PRELUDE + "init()\nfn = kernel()\nlaunch(fn)\n", check=False,
                        REVATI_CPU_DILATION=bad)
    assert proc.returncode != 0
    assert f"REVATI_CPU_DILATION={bad}: expected a number from 0.1 to 100" in proc.stderr


def test_graph_replay_queues_the_captured_kernels(emulated):
    out = timed(emulated, """
s = stream()
g, ge = c(), c()
t0 = time.perf_counter()
ok(cu.cuStreamBeginCapture_v2(s, 0))
launch(fn, s, 50)
ok(cu.cuStreamEndCapture(s, ctypes.byref(g)))
ok(cu.cuStreamSynchronize(s))
capture = time.perf_counter() - t0
n = ctypes.c_size_t()
ok(cu.cuGraphGetNodes(g, None, ctypes.byref(n)))
ok(cu.cuGraphInstantiateWithFlags(ctypes.byref(ge), g, ctypes.c_uint64(0)))
t0 = time.perf_counter()
for _ in range(3):
    ok(cu.cuGraphLaunch(ge, s))
ok(cu.cuStreamSynchronize(s))
print(json.dumps({"capture": capture, "nodes": n.value, "replay": time.perf_counter() - t0}))
""")
    assert out["nodes"] == 50
    # capturing runs nothing: host time only, where running the 50 kernels would take 0.1 s
    assert out["capture"] < HOST_DELAY + emulated.stolen_s
    assert 0.300 <= out["replay"] < 0.300 + 0.04 + emulated.stolen_s


def test_host_function_runs_when_the_stream_reaches_it(emulated):
    out = timed(emulated, """
ran = []
CB = ctypes.CFUNCTYPE(None, c)
cb = CB(lambda _: ran.append(time.perf_counter()))
s = stream()
t0 = time.perf_counter()
launch(fn, s, 10)
ok(cu.cuLaunchHostFunc(s, cb, None))
ok(cu.cuStreamSynchronize(s))
time.sleep(0.01)
print(json.dumps({"at": ran[0] - t0 if ran else None}))
""")
    assert out["at"] is not None and out["at"] >= 0.020


def test_ipc_handle_opens_device_memory_of_the_same_size_in_another_process(emulated):
    exported = driver(emulated, """
init()
p = ctypes.c_uint64()
ok(cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(3 << 20)))
h = (ctypes.c_char * 64)()
ok(cu.cuIpcGetMemHandle(ctypes.byref(h), p))
inner = ctypes.c_uint64(p.value + 512)
print(json.dumps({"handle": bytes(h).hex(), "inner": cu.cuIpcGetMemHandle(ctypes.byref(h), inner)}))
""", gpus=2)
    assert exported["inner"] == 1  # only an allocation's start has a handle
    opened = driver(emulated, f"""
init()
class Handle(ctypes.Structure):  # CUipcMemHandle is passed by value
    _fields_ = [("reserved", ctypes.c_char * 64)]
h = Handle.from_buffer_copy(bytes.fromhex("{exported['handle']}"))
p, base, size = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_size_t()
ok(cu.cuIpcOpenMemHandle_v2(ctypes.byref(p), h, 1))
ok(cu.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), p))
ordinal = ctypes.c_int()
ok(cu.cuPointerGetAttribute(ctypes.byref(ordinal), 9, p))  # CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
data = os.urandom(4096)
ok(cu.cuMemcpyHtoD_v2(p, data, len(data)))
back = ctypes.create_string_buffer(len(data))
ok(cu.cuMemcpyDtoH_v2(back, p, len(data)))
free = ctypes.c_size_t(); total = ctypes.c_size_t()
ok(cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)))
ok(cu.cuIpcCloseMemHandle(p))
print(json.dumps({{"size": size.value, "same_base": base.value == p.value, "ordinal": ordinal.value,
                  "roundtrip": back.raw == data, "free_untouched": total.value - free.value}}))
""", gpus=2)
    assert opened == {"size": 3 << 20, "same_base": True, "ordinal": 0, "roundtrip": True,
                      "free_untouched": load_spec("h200_sxm").context_reserved_bytes}


def test_vmm_allocation_travels_as_a_file_descriptor(emulated):
    out = driver(emulated, """
init()
class Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]
class Prop(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", Location), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", ctypes.c_ubyte * 8)]
prop = Prop(type=1, requestedHandleTypes=1, location=Location(type=1, id=0))
h, h2 = ctypes.c_uint64(), ctypes.c_uint64()
ok(cu.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(4 << 20), ctypes.byref(prop),
                  ctypes.c_uint64(0)))
fd = ctypes.c_int()
ok(cu.cuMemExportToShareableHandle(ctypes.byref(fd), h, 1, ctypes.c_uint64(0)))
ok(cu.cuMemImportFromShareableHandle(ctypes.byref(h2), ctypes.c_void_p(fd.value), 1))
back = Prop()
ok(cu.cuMemGetAllocationPropertiesFromHandle(ctypes.byref(back), h2))
print(json.dumps({"fd": fd.value > 2, "type": back.type, "handles": back.requestedHandleTypes,
                  "device": back.location.id}))
""")
    assert out == {"fd": True, "type": 1, "handles": 1, "device": 0}


NVCC = "/usr/local/cuda-13.0/bin/nvcc"


@pytest.mark.skipif(not __import__("os").path.exists(NVCC), reason="nvcc not installed")
def test_kernel_parameter_layout_comes_from_the_cubin(emulated, tmp_path):
    import subprocess

    src = tmp_path / "k.cu"
    src.write_text('extern "C" __global__ void probe(int *a, float b, double c, char d)'
                   " { if (a) a[0] = (int)(b + c + d); }\n")
    subprocess.run([NVCC, "-cubin", "-arch=sm_90", "-o", str(tmp_path / "k.cubin"), str(src)],
                   check=True, capture_output=True)
    out = driver(emulated, f"""
init()
image = open("{tmp_path / 'k.cubin'}", "rb").read()
mod, fn = c(), c()
ok(cu.cuModuleLoadData(ctypes.byref(mod), image))
ok(cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"probe"))
layout = []
for i in range(5):
    off, size = ctypes.c_size_t(), ctypes.c_size_t()
    r = cu.cuFuncGetParamInfo(fn, ctypes.c_size_t(i), ctypes.byref(off), ctypes.byref(size))
    layout.append([off.value, size.value] if r == 0 else r)
print(json.dumps(layout))
""")
    assert out == [[0, 8], [8, 4], [16, 8], [24, 1], 1]  # the 5th: CUDA_ERROR_INVALID_VALUE


KERNELS = r"""
extern "C" __global__ void __launch_bounds__(256) bounded(float *a) {
    __shared__ float tile[1024];
    tile[threadIdx.x] = a[threadIdx.x];
    __syncthreads();
    a[threadIdx.x] = tile[(threadIdx.x * 7) % 1024];
}
extern "C" __global__ void heavy(const float *a, float *b, int n) {
    float acc[64];
    #pragma unroll
    for (int i = 0; i < 64; i++) acc[i] = a[(threadIdx.x + i * 97) % n];
    float s = 0;
    #pragma unroll
    for (int r = 0; r < 8; r++)
        #pragma unroll
        for (int i = 0; i < 64; i++) s += acc[i] * acc[(i + r) % 64];
    b[threadIdx.x] = s;
}
extern "C" __global__ void stacked(float *a, int k) {
    float buf[512];  // indexed by run-time values: kept in local memory, a stack frame
    for (int i = 0; i < 512; i++) buf[(i * k) % 512] = a[i];
    a[threadIdx.x] = buf[(threadIdx.x * k + 3) % 512];
}
"""

# A module whose one kernel calls assert (__assertfail: EIATTR_EXTERNS) and another that does not
ASSERTING = r"""
#include <cassert>
extern "C" __global__ void unchecked(float *a, int k) { a[threadIdx.x] *= k; }
extern "C" __global__ void checked(float *a, int k) { assert(k > 0); a[threadIdx.x] += k; }
"""

@pytest.mark.skipif(not __import__("os").path.exists(NVCC), reason="nvcc not installed")
def test_kernel_resource_attributes_come_from_the_cubin(emulated, tmp_path):
    """Registers, static shared memory and stack frame as ptxas reports them for the same
    cubin; launch bounds and registers cap the threads per block."""
    import re
    import subprocess

    (tmp_path / "k.cu").write_text(KERNELS)
    built = subprocess.run([NVCC, "-cubin", "-arch=sm_90", "-Xptxas", "-v", "-o",
                            str(tmp_path / "k.cubin"), str(tmp_path / "k.cu")],
                           check=True, capture_output=True, text=True)
    ptxas = {}
    for name, body in re.findall(r"Function properties for (\w+)\n(.*?)(?=ptxas info    : "
                                 r"Compiling|\Z)", built.stderr, re.S):
        ptxas[name] = {"regs": int(re.search(r"Used (\d+) registers", body)[1]),
                       "smem": int((re.search(r"(\d+) bytes smem", body) or [0, 0])[1]),
                       "stack": int(re.search(r"(\d+) bytes stack frame", body)[1])}
    assert set(ptxas) == {"bounded", "heavy", "stacked"}, built.stderr
    out = driver(emulated, f"""
init()
image = open("{tmp_path / 'k.cubin'}", "rb").read()
mod = c()
ok(cu.cuModuleLoadData(ctypes.byref(mod), image))
res = {{}}
for name in ("bounded", "heavy", "stacked"):
    fn = c()
    ok(cu.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()))
    got = []
    for attr in (4, 1, 3, 0):  # NUM_REGS, SHARED_SIZE_BYTES, LOCAL_SIZE_BYTES, MAX_THREADS
        v = ctypes.c_int()
        ok(cu.cuFuncGetAttribute(ctypes.byref(v), attr, fn))
        got.append(v.value)
    res[name] = got
print(json.dumps(res))
""")
    for name, (regs, smem, local, _) in out.items():
        assert [regs, smem, local] == [ptxas[name]["regs"], ptxas[name]["smem"],
                                       ptxas[name]["stack"]], (name, out, ptxas)
    assert ptxas["bounded"]["smem"] == 4096 and ptxas["stacked"]["stack"] > 0
    assert out["bounded"][3] == 256  # __launch_bounds__(256)
    # 64K registers a block, allocated per warp in 256s
    assert out["heavy"][3] == 65536 // ((ptxas["heavy"]["regs"] * 32 + 255) // 256 * 256) * 32


@pytest.mark.skipif(not __import__("os").path.exists(NVCC), reason="nvcc not installed")
def test_driver_memory_lowers_free_memory_as_on_the_h200(emulated, tmp_path):
    """What the real driver allocates for itself (measured on the H200, cuda_memory.c): deeper
    thread stacks (264 MiB per KiB), a kernel's code when it first runs, 90 MiB once for the
    first kernel of a module that calls assert (whichever kernel of it), 552 KiB a stream,
    and each graph and its nodes from pools that keep a destroyed graph's memory."""
    import subprocess

    (tmp_path / "k.cu").write_text(KERNELS)
    (tmp_path / "a.cu").write_text(ASSERTING)
    for name in ("k", "a"):
        subprocess.run([NVCC, "-cubin", "-arch=sm_90", "-o", str(tmp_path / f"{name}.cubin"),
                        str(tmp_path / f"{name}.cu")], check=True, capture_output=True)
    out = driver(emulated, f"""
init()
mib = 1 << 20
steps = {{}}
f0 = free()
ok(cu.cuCtxSetLimit(0, ctypes.c_size_t(2048)))   # CU_LIMIT_STACK_SIZE
steps["stack 2 KiB"] = (f0 - free()) / mib
ok(cu.cuCtxSetLimit(0, ctypes.c_size_t(1024)))
steps["stack back to 1 KiB"] = (f0 - free()) / mib
image = open("{tmp_path / 'k.cubin'}", "rb").read()
mod, stacked, frame = c(), c(), ctypes.c_int()
ok(cu.cuModuleLoadData(ctypes.byref(mod), image))
ok(cu.cuModuleGetFunction(ctypes.byref(stacked), mod, b"stacked"))
ok(cu.cuFuncGetAttribute(ctypes.byref(frame), 3, stacked))   # LOCAL_SIZE_BYTES
steps["module loaded"] = (f0 - free()) / mib
buf = c()
ok(cu.cuMemAlloc_v2(ctypes.byref(buf), 1 << 20))
f1 = free()
arg = c(buf.value); k = ctypes.c_int(3)
params = (c * 2)(ctypes.addressof(arg), ctypes.addressof(k))
ok(cu.cuLaunchKernel(stacked, 1, 1, 1, 32, 1, 1, 0, None, params, None))
steps["deep kernel launched"] = (f1 - free()) / mib
def run(path, kernel):
    m, fn = c(), c()
    ok(cu.cuModuleLoadData(ctypes.byref(m), open(path, "rb").read()))
    ok(cu.cuModuleGetFunction(ctypes.byref(fn), m, kernel))
    ok(cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, None, params, None))
f3 = free()
run("{tmp_path / 'a.cubin'}", b"unchecked")
steps["kernel of a module with assert"] = (f3 - free()) / mib
run("{tmp_path / 'a.cubin'}", b"checked")   # a second module with assert
steps["then another's asserting kernel"] = (f3 - free()) / mib
f2 = free()
streams = [stream() for _ in range(35)]
steps["35 streams"] = (f2 - free()) / mib
for h in streams:
    ok(cu.cuStreamDestroy_v2(h))
s = stream()
steps["destroyed, one more"] = (f2 - free()) / mib
def graph(n):
    g, ge = c(), c()
    ok(cu.cuStreamBeginCapture_v2(s, 0))
    for _ in range(n):
        ok(cu.cuLaunchKernel(stacked, 1, 1, 1, 32, 1, 1, 0, s, params, None))
    ok(cu.cuStreamEndCapture(s, ctypes.byref(g)))
    ok(cu.cuGraphInstantiateWithFlags(ctypes.byref(ge), g, ctypes.c_uint64(0)))
    return ge
graph(1)
steps["first graph"] = (f2 - free()) / mib
big = graph(4000)
steps["4,000-node graph"] = (f2 - free()) / mib
ok(cu.cuGraphExecDestroy(big))
steps["destroyed"] = (f2 - free()) / mib
graph(4000)
steps["again"] = (f2 - free()) / mib
print(json.dumps({{"steps": steps, "frame": frame.value}}))
""")
    steps, threads = out["steps"], 132 * 2048
    assert steps["stack 2 KiB"] == 264 and steps["stack back to 1 KiB"] == 0
    assert steps["module loaded"] == 0  # lazy loading: code goes to the GPU when it runs
    assert out["frame"] > 1024  # deeper than the default stack
    # the context's first kernel: its stack, and the code pool's first 2 MiB step
    assert steps["deep kernel launched"] == (out["frame"] - 1024) * threads / (1 << 20) + 2
    assert steps["kernel of a module with assert"] == 90  # its code fit the code pool
    assert steps["then another's asserting kernel"] == 90  # once per context
    # 504 + 48 KiB a stream from pools with 768 and 1,720 KiB free: 18 MiB as on the H200
    assert steps["35 streams"] == 18 and steps["destroyed, one more"] == 18
    assert steps["first graph"] == 18  # 64 + 48 KiB and its node fit what the pools hold
    # 4,000 nodes of 2,097 bytes: 8.0 MiB, 2 MiB of it free in the node pool: 4 steps
    assert steps["4,000-node graph"] == 18 + 8
    assert steps["destroyed"] == steps["again"] == 26  # kept by the driver, then reused


def test_graphs_and_small_allocations_take_pages_where_the_h200_did(emulated):
    """Measured on the H200 (tools/calibrate/driver_memory_graph_pools.py,
    tools/calibrate/driver_memory_torch.py allocs; validation/calibration/driver-memory/README.md):
    after torch's pool of 128 streams, one-node graphs grow the driver's memory at the 9th,
    36th and 41st graph (pools of 64 and 48 KiB a
    graph with 512 and 1,720 KiB free); 8 streams more take the 48 KiB pool's share (its step
    comes at the 28th graph); allocations under 2 MiB share 2 MiB pages."""
    body = """
init()
fn = kernel()
s = [stream() for _ in range(STREAMS)][0]
graphs, last = [], free()
for i in range(45):
    g, ge = c(), c()
    ok(cu.cuStreamBeginCapture_v2(s, 0))
    launch(fn, s)
    ok(cu.cuStreamEndCapture(s, ctypes.byref(g)))
    ok(cu.cuGraphInstantiateWithFlags(ctypes.byref(ge), g, ctypes.c_uint64(0)))
    if free() != last:
        graphs.append(i + 1)
    last = free()
allocs, before = [], free()
for size in (512, 4096, 100 << 10, 1 << 20, 1 << 20, 1536 << 10, 3 << 20, 200 << 10):
    ok(cu.cuMemAlloc_v2(ctypes.byref(c()), ctypes.c_size_t(size)))
    allocs.append((before - free()) / (1 << 20))
print(json.dumps({"graphs": graphs, "allocs": allocs}))
"""
    out = driver(emulated, body.replace("STREAMS", "128"))
    assert out["graphs"] == [9, 36, 41]
    assert out["allocs"] == [2, 2, 2, 2, 4, 6, 10, 10]
    assert driver(emulated, body.replace("STREAMS", "136"))["graphs"] == [9, 28, 41]


def test_graph_nodes_cost_the_driver_what_they_cost_on_the_h200(emulated):
    """Measured on the H200 (validation/calibration/driver-memory/README.md, "Graphs of GEMMs,
    copies, memsets and attention"): the driver keeps nothing for a memset node of up to 4 KiB,
    as much as for a small kernel for a larger one (2,097 bytes), and 786 bytes more for a
    kernel launched with programmatic dependent launch (cuBLASLt's split-K reduction), from the
    graph pool that grows in 2 MiB steps."""
    out = driver(emulated, """
init()
class Attr(ctypes.Structure):   # CUlaunchAttribute: id, padding, a 64-byte value union
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int),
                ("rest", ctypes.c_char * 60)]
class Config(ctypes.Structure):   # CUlaunchConfig
    _fields_ = [("dims", ctypes.c_uint * 7), ("stream", c), ("attrs", ctypes.POINTER(Attr)),
                ("num", ctypes.c_uint)]
s, fn, buf = stream(), kernel(), c()
ok(cu.cuMemAlloc_v2(ctypes.byref(buf), 1 << 20))
pdl = Attr(id=6, value=1)   # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
config = Config((ctypes.c_uint * 7)(1, 1, 1, 32, 1, 1, 0), s, ctypes.pointer(pdl), 1)
def graph(n, queue):
    g, ge = c(), c()
    ok(cu.cuStreamBeginCapture_v2(s, 0))
    for _ in range(n):
        queue()
    ok(cu.cuStreamEndCapture(s, ctypes.byref(g)))
    ok(cu.cuGraphInstantiateWithFlags(ctypes.byref(ge), g, ctypes.c_uint64(0)))
def memset(size):
    return lambda: ok(cu.cuMemsetD8Async(buf, 0, ctypes.c_size_t(size), s))
graph(1, lambda: launch(fn, s))   # a first graph, as before the probes on the H200
steps, before = {}, free()
for name, queue in (("4 KiB memsets", memset(4096)), ("8 KiB memsets", memset(8192)),
                    ("kernels with PDL", lambda: ok(cu.cuLaunchKernelEx(ctypes.byref(config),
                                                                         fn, None, None)))):
    graph(4000, queue)
    steps[name] = (before - free()) / (1 << 20)
    before = free()
print(json.dumps(steps))
""")
    # 1.998 MiB left in the node pool after the first graph
    assert out["4 KiB memsets"] == 0  # a kernel-like node each would have been 8 MiB
    assert out["8 KiB memsets"] == 8  # 4,000 x 2,097 bytes: 8.1 MiB, 1.8 of it free
    assert out["kernels with PDL"] == 10  # 4,000 x 2,883 bytes (without PDL: 8 MiB)


SIZED = r"""
extern "C" __global__ void sized(float *x, int n, long long m, float eps, int neg) {
    extern __shared__ float dyn[];   // dynamic shared memory only: no static bytes
    dyn[threadIdx.x] = x[threadIdx.x % n] * eps + m + neg;
    __syncthreads();
    x[threadIdx.x] = dyn[(threadIdx.x + 1) % blockDim.x];
}
"""


@pytest.mark.skipif(not __import__("os").path.exists(NVCC), reason="nvcc not installed")
def test_launch_log_carries_argument_sizes_and_shared_memory(emulated, tmp_path):
    """What the predictor sees of a launch, as REVATI_LAUNCH_LOG writes it: the sizes among
    the scalar arguments (from kernelParams and from a packed `extra` buffer alike; floats,
    negative values and pointers left out) and static + dynamic shared memory, as CUPTI
    reports it. A kernel with only dynamic shared memory has no static bytes."""
    import subprocess

    (tmp_path / "k.cu").write_text(SIZED)
    subprocess.run([NVCC, "-cubin", "-arch=sm_90", "-o", str(tmp_path / "k.cubin"),
                    str(tmp_path / "k.cu")], check=True, capture_output=True)
    log = tmp_path / "launches.tsv"
    out = driver(emulated, f"""
init()
image = open("{tmp_path / 'k.cubin'}", "rb").read()
mod, fn = c(), c()
ok(cu.cuModuleLoadData(ctypes.byref(mod), image))
ok(cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"sized"))
smem = ctypes.c_int()
ok(cu.cuFuncGetAttribute(ctypes.byref(smem), 1, fn))  # SHARED_SIZE_BYTES
x = ctypes.c_uint64()
ok(cu.cuMemAlloc_v2(ctypes.byref(x), 4096))
args = [x, ctypes.c_int(4096), ctypes.c_longlong(14336), ctypes.c_float(1e-6), ctypes.c_int(-3)]
params = (c * 5)(*[ctypes.cast(ctypes.byref(a), c) for a in args])
ok(cu.cuLaunchKernel(fn, 64, 1, 1, 128, 1, 1, 512, None, params, None))
buf = (ctypes.c_char * 32)()
for a, off in zip(args, (0, 8, 16, 24, 28)):
    ctypes.memmove(ctypes.addressof(buf) + off, ctypes.byref(a), ctypes.sizeof(a))
size = ctypes.c_size_t(32)
extra = (c * 5)(c(1), ctypes.cast(buf, c), c(2), ctypes.cast(ctypes.byref(size), c), c(0))
ok(cu.cuLaunchKernel(fn, 64, 1, 1, 128, 1, 1, 512, None, None, extra))
ok(cu.cuCtxSynchronize())
print(json.dumps({{"smem": smem.value}}))
""", REVATI_LAUNCH_LOG=str(log), REVATI_PREDICT_FIXED_NS="1000")
    assert out["smem"] == 0
    lines = [line.split("\t") for line in log.read_text().splitlines()]
    kernels = [f for f in lines if f[1] == "sized"]
    assert len(kernels) == 2
    for f in kernels:
        # op, name, grid, block, shared, bytes, copy kind, arg_max, arg_sum
        assert f[0] == "0" and f[2:5] == ["64", "1", "1"] and f[5:8] == ["128", "1", "1"]
        assert f[8] == "512"
        assert (int(f[11]), int(f[12])) == (14336, 4096 + 14336)
