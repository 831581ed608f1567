"""Device memory that PyTorch's own use of the driver takes, outside its allocator (MiB):
torch's stream pool, raw streams, and the first launches of PyTorch kernels.

    python3 tools/calibrate/driver_memory_torch.py streams   # raw streams, launches, the pool
    python3 tools/calibrate/driver_memory_torch.py kernels   # one PyTorch kernel after another
    python3 tools/calibrate/driver_memory_torch.py first NAME  # one of KERNELS alone, after randn
    python3 tools/calibrate/driver_memory_torch.py priority  # raw streams with priorities
    python3 tools/calibrate/driver_memory_torch.py gemms     # cuBLAS: Llama-3.1-8B GEMMs by tokens
    python3 tools/calibrate/driver_memory_torch.py allocs    # cudaMalloc of small sizes, then frees

Each prints one line "RESULT {json}": after every step, the device memory in use that torch's
allocator did not reserve. Run it on a real GPU and under `revati run --hardware h200_sxm` to
compare (validation/calibration/driver-memory/README.md, "PyTorch's streams and kernels").
"""

from __future__ import annotations

import ctypes
import json
import sys

import torch


def nontorch() -> float:
    free, total = torch.cuda.mem_get_info()
    return round((total - free - torch.cuda.memory_reserved()) / 2**20, 1)


def cudart() -> ctypes.CDLL:
    """The CUDA runtime torch loaded (its own copy, found among the process's mappings)."""
    path = next(ln.split()[-1] for ln in open("/proc/self/maps") if "libcudart.so" in ln)
    return ctypes.CDLL(path)


def streams() -> dict[str, float]:
    x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
    x + 1
    torch.cuda.synchronize()
    rt = cudart()
    out = {"start": nontorch()}
    raw = []
    for n in (1, 7):
        for _ in range(n):
            h = ctypes.c_void_p()
            assert rt.cudaStreamCreate(ctypes.byref(h)) == 0
            raw.append(h.value)
        out[f"raw_streams_{len(raw)}"] = nontorch()
    for i in (0, 1, 2):
        with torch.cuda.stream(torch.cuda.ExternalStream(raw[i])):
            x + 1
        torch.cuda.synchronize()
        out[f"add_on_raw_{i}"] = nontorch()
    s = torch.cuda.Stream()  # torch's stream pool: its streams are created on first use
    out["torch_pool_stream"] = nontorch()
    with torch.cuda.stream(s):
        x * 2
    torch.cuda.synchronize()
    out["mul_on_pool_stream"] = nontorch()
    return out


def _steps(x: torch.Tensor) -> dict[str, object]:
    return {"zeros_fill": lambda: torch.zeros(1024, device="cuda"),
            "copy_to_float": lambda: x.float(),
            "mul_bf16": lambda: x * 2,
            "add_bf16": lambda: x + 1,
            "add_float": lambda: x.float() + 1,
            "sum": lambda: x.sum(),
            "softmax": lambda: torch.softmax(x, -1),
            "index_select": lambda: x[torch.tensor([0, 3], device="cuda")]}


def kernels(only: str | None = None) -> dict[str, float]:
    x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    out = {"randn": nontorch()}
    for name, fn in _steps(x).items():
        if only in (None, name):
            fn()
            torch.cuda.synchronize()
            out[name] = nontorch()
    return out


def priority() -> dict[str, float]:
    torch.cuda.init()
    torch.empty(1, device="cuda")
    rt = cudart()
    out = {"start": nontorch()}
    made = 0
    for prio, n in ((0, 1), (-1, 1), (-2, 1), (0, 32), (-1, 32)):
        for _ in range(n):
            h = ctypes.c_void_p()
            assert rt.cudaStreamCreateWithPriority(ctypes.byref(h), 1, prio) == 0
            made += 1
        out[f"{made}_streams_after_prio_{prio}"] = nontorch()
    return out


def gemms() -> dict[str, float]:
    """cuBLAS's first GEMM (its handle and workspace), then Llama-3.1-8B's linear layers and
    LM head (bf16) at the token counts of vLLM's profiling run (8,192) and its small batches:
    what the kernels cuBLAS picks for each shape take when they first run."""
    layers = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096),
              "down": (4096, 14336), "lm_head": (128256, 4096)}
    bf16 = {"device": "cuda", "dtype": torch.bfloat16}
    weights = [torch.randn(o, i, **bf16) for o, i in layers.values()]
    x = torch.randn(64, 64, **bf16)
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    out = {"start": nontorch()}
    x @ x
    torch.cuda.synchronize()
    out["first_gemm"] = nontorch()
    for m in (8192, 1, 8, 64, 256, 512):
        for w in weights:
            torch.nn.functional.linear(torch.randn(m, w.shape[1], **bf16), w)
        torch.cuda.synchronize()
        out[f"tokens_{m}"] = nontorch()
    return out


def allocs() -> dict[str, float]:
    """cudaMalloc outside torch's allocator (as cuBLAS does for its handle): whether small
    allocations each take memory of their own or share the driver's 2 MiB pages."""
    torch.empty(1, device="cuda")
    rt = cudart()
    out, held = {"start": nontorch()}, []
    for size in (512, 4096, 100 << 10, 100 << 10, 1 << 20, 1 << 20, 1536 << 10, 3 << 20,
                 (64 << 20) + (200 << 10), 200 << 10):
        p = ctypes.c_void_p()
        assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size)) == 0
        held.append(p)
        out[f"{len(held)}_malloc_{size}"] = nontorch()
    for p in held[:4]:
        assert rt.cudaFree(p) == 0
    out["freed_first_4"] = nontorch()
    return out


if __name__ == "__main__":
    probes = {"streams": streams, "kernels": kernels, "priority": priority, "gemms": gemms,
              "allocs": allocs}
    if len(sys.argv) == 3 and sys.argv[1] == "first":
        names = list(_steps(torch.empty(0)))
        if sys.argv[2] not in names:
            sys.exit(f"first: unknown kernel {sys.argv[2]!r}; one of {', '.join(names)}")
        print("RESULT", json.dumps(kernels(sys.argv[2])))
    elif len(sys.argv) == 2 and sys.argv[1] in probes:
        print("RESULT", json.dumps(probes[sys.argv[1]]()))
    else:
        sys.exit(f"usage: {sys.argv[0]} {'|'.join(probes)} | first KERNEL")
