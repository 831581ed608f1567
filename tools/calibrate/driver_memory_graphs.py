"""Device memory a real CUDA driver takes for executable graphs of the nodes serving engines
capture: cuBLAS GEMMs of a Llama-3.1-8B layer, attention, copies, memsets, two streams.

`tools/calibrate/driver_memory.py` measured graphs of one small kernel repeated (~2.1 KB a node);
vLLM's full CUDA graphs hold GEMMs, copies and memsets too, and what the driver charges for
those (and how many nodes a cuBLAS call becomes) decides the last 2 MiB pool steps of vLLM's
CUDA-graph estimate (docs/validation.md, "KV-cache size"). Each probe runs in a fresh process
after a one-node warm-up graph (which takes the stream and graph pools' first steps), captures
one graph of the probe's calls, instantiates it, and reports the device memory that torch's
allocator did not reserve, before and after, with the graph's nodes by type:

    python3 tools/calibrate/driver_memory_graphs.py            # every probe, one process each
    python3 tools/calibrate/driver_memory_graphs.py PROBE      # one probe, in this process
    python3 tools/calibrate/driver_memory_graphs.py all P1 P2  # these probes, one process each

Each probe prints one line "RESULT {json}"; PROBE_SCALE=k captures k times as many calls.
Run it on a real GPU and under `revati run --hardware h200_sxm` to compare
(validation/calibration/driver-memory/README.md).
"""

from __future__ import annotations

import collections
import ctypes
import json
import os
import subprocess
import sys
from collections.abc import Callable

import torch
from driver_memory_torch import cudart  # this script's own folder is on sys.path

MIB = 2**20
HIDDEN, QKV, FFN = 4096, 6144, 14336   # Llama-3.1-8B
NODE_TYPES = {0: "kernel", 1: "memcpy", 2: "memset", 3: "host", 4: "graph", 5: "empty",
              6: "wait_event", 7: "event_record", 10: "mem_alloc", 11: "mem_free"}


def nontorch() -> int:
    free, total = torch.cuda.mem_get_info()
    return total - free - torch.cuda.memory_reserved()


def graph_nodes(rt: ctypes.CDLL, graph: int) -> list[tuple[int, int]]:
    """(node handle, node type) of every node of a captured graph."""
    n = ctypes.c_size_t(0)
    assert rt.cudaGraphGetNodes(ctypes.c_void_p(graph), None, ctypes.byref(n)) == 0
    nodes = (ctypes.c_void_p * n.value)()
    assert rt.cudaGraphGetNodes(ctypes.c_void_p(graph), nodes, ctypes.byref(n)) == 0
    out = []
    for node in nodes:
        t = ctypes.c_int(-1)
        assert rt.cudaGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(t)) == 0
        out.append((node, t.value))
    return out


LINEAR = {"qkv": (QKV, HIDDEN), "o": (HIDDEN, HIDDEN), "gate_up": (2 * FFN, HIDDEN),
          "down": (HIDDEN, FFN)}   # (out, in) features of Llama-3.1-8B's linear layers


def linear_layers(m: int, which: list[str]) -> Callable[[], None]:
    """GEMMs of a Llama-3.1-8B layer for m tokens (bf16, as vLLM runs them)."""
    pairs = [(torch.randn(m, i, device="cuda", dtype=torch.bfloat16),
              torch.randn(o, i, device="cuda", dtype=torch.bfloat16) / 64)
             for o, i in (LINEAR[w] for w in which)]

    def layer() -> None:
        for x, w in pairs:
            torch.nn.functional.linear(x, w)
    return layer


def kernels(nodes: list[tuple[int, int]]) -> list[dict[str, object]]:
    """Each distinct kernel among the nodes: name, parameter bytes, nodes (driver API; the
    emulator does not report node parameters, so this is empty there)."""
    try:
        cu = ctypes.CDLL("libcuda.so.1")
        seen: collections.Counter[int] = collections.Counter()
        for node, kind in nodes:
            if kind != 0:
                continue
            params = (ctypes.c_void_p * 16)()   # CUDA_KERNEL_NODE_PARAMS_v2: func first
            if cu.cuGraphKernelNodeGetParams_v2(ctypes.c_void_p(node), params) != 0:
                return []
            seen[params[0]] += 1
        out = []
        for func, count in seen.items():
            name = ctypes.c_char_p()
            cu.cuFuncGetName(ctypes.byref(name), ctypes.c_void_p(func))
            end, i = 0, 0
            off, size = ctypes.c_size_t(), ctypes.c_size_t()
            while cu.cuFuncGetParamInfo(ctypes.c_void_p(func), ctypes.c_size_t(i),
                                        ctypes.byref(off), ctypes.byref(size)) == 0:
                end, i = off.value + size.value, i + 1
            out.append({"kernel": (name.value or b"?").decode()[:90], "param_bytes": end,
                        "nodes": count})
        return out
    except (OSError, AttributeError):
        return []


def probe_calls(name: str) -> tuple[Callable[[], None], int]:
    """(one call, how many times to capture it) for each probe."""
    x = torch.randn(1 << 18, device="cuda")
    y = torch.empty_like(x)
    if name == "small":
        return (lambda: x.add_(1)), 8000
    if name == "copy":   # 16 KiB
        return (lambda: y[:4096].copy_(x[:4096])), 8000
    if name.startswith("memset"):   # memset[<bytes>][_add]: alone, or each before a kernel
        size, _, add = name[6:].partition("_")
        rt, size = cudart(), int(size or 16384)

        def memset() -> None:
            s = torch.cuda.current_stream().cuda_stream
            assert rt.cudaMemsetAsync(ctypes.c_void_p(y.data_ptr()), 0, ctypes.c_size_t(size),
                                      ctypes.c_void_p(s)) == 0
            if add:
                x.add_(1)
        return memset, 4000 if add else 8000
    if name.startswith("gemm"):   # gemm<M>[_<layer>]: every layer of LINEAR, or one
        m, _, which = name[4:].partition("_")
        layers = [which] if which else list(LINEAR)
        return linear_layers(int(m), layers), 8000 // len(layers)
    if name == "attention":
        q = torch.randn(1, 32, 8, 128, device="cuda", dtype=torch.bfloat16)
        kv = torch.randn(1, 32, 1024, 128, device="cuda", dtype=torch.bfloat16)
        return (lambda: torch.nn.functional.scaled_dot_product_attention(q, kv, kv)), 4000
    if name == "two_streams":
        side = torch.cuda.Stream()

        def fork_join() -> None:
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                y.mul_(2)
            torch.cuda.current_stream().wait_stream(side)
            x.add_(1)
        return fork_join, 4000
    raise SystemExit(f"unknown probe {name!r}; one of {', '.join(PROBES)}")


PROBES = ["small", "copy", "memset", "gemm8", "gemm512", "attention", "two_streams"]
PROBES += [f"gemm{m}_{w}" for m in (8, 512) for w in LINEAR]
PROBES += ["memset4", "memset256", "memset1048576", "memset_add", "memset4_add"]


def measure(name: str) -> dict[str, object]:
    call, repeat = probe_calls(name)
    repeat *= int(os.environ.get("PROBE_SCALE", "1"))   # more nodes: finer than 2 MiB steps
    call()
    warm = torch.cuda.CUDAGraph()
    with torch.cuda.graph(warm):
        call()
    torch.cuda.synchronize()
    before = nontorch()
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g):
        for _ in range(repeat):
            call()
    captured = nontorch()
    g.instantiate()
    instantiated = nontorch()
    g.replay()
    torch.cuda.synchronize()
    replayed = nontorch()
    nodes = graph_nodes(cudart(), g.raw_cuda_graph())
    kinds = collections.Counter(NODE_TYPES.get(t, str(t)) for _, t in nodes)
    taken = instantiated - captured
    return {"probe": name, "calls": repeat, "nodes": dict(kinds),
            "capture_mib": (captured - before) / MIB, "instantiate_mib": taken / MIB,
            "replay_mib": (replayed - instantiated) / MIB,
            "bytes_per_node": round(taken / max(1, len(nodes))), "kernels": kernels(nodes)}


if __name__ == "__main__":
    if len(sys.argv) == 1 or sys.argv[1] == "all":
        for p in sys.argv[2:] or PROBES:
            subprocess.run([sys.executable, __file__, p], check=False)
    elif len(sys.argv) == 2:
        print("RESULT", json.dumps(measure(sys.argv[1])), flush=True)
    else:
        sys.exit(f"usage: {sys.argv[0]} [all [PROBE ...] | PROBE]; probes: {' '.join(PROBES)}")
