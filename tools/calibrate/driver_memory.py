#!/usr/bin/env python3
"""Measure the device memory a real CUDA driver takes outside every allocator.

Serving engines size their KV cache from `cudaMemGetInfo` after profiling: whatever the driver
allocates for itself in the meantime (local memory for deeper thread stacks, executable CUDA
graphs, the code of lazily loaded kernels, library handles) is memory the KV cache does not
get. The device shim has to charge the same amounts to reproduce `num_gpu_blocks`, so this
script measures each one on a real GPU with torch alone, as free-memory deltas from which the
torch allocator's own reservations are subtracted:

- thread stacks: `cuCtxSetLimit(CU_LIMIT_STACK_SIZE, s)` for growing s, then back down;
- CUDA graphs: graphs of N kernel nodes (an in-place add, a strided copy and a 64-input
  concatenation: small, ~650-byte and ~3.4 KB parameter blocks) captured and instantiated,
  replayed, freed and instantiated again;
- modules: cubins of one small kernel, one 1.8 MB kernel and 64 small kernels loaded,
  their kernels launched once, unloaded (--cubins);
- first use of kernels from modules not loaded yet (lazy loading), and of cuBLAS.

The cubins are built where nvcc is (the development machine) and carried to the GPU node;
`sweep` measures one point per fresh process (graphs of N nodes, N graphs, kernels of a given
parameter or code size) and prints one JSON line each; without a subcommand, one process
measures everything in turn and writes one JSON document (also to OUT/driver_memory.json):

    python3 tools/calibrate/driver_memory.py cubins DIR          # here: the test kernels, nvcc
    python3 tools/calibrate/driver_memory.py sweep --cubins DIR  # on the GPU node: JSON lines
    python3 tools/calibrate/driver_memory.py [--out DIR] [--cubins DIR]

Results and the commands that produced them: validation/calibration/driver-memory/.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
from functools import partial

CU_LIMIT_STACK_SIZE = 0
MIB = 1 << 20


def modules(cuda, folder: str, driver_delta) -> list[dict[str, object]]:
    import torch

    vp = ctypes.c_void_p
    out = []
    buf = torch.zeros(1024, device="cuda")
    arg = vp(buf.data_ptr())
    params = (vp * 1)(ctypes.addressof(arg))
    for name, copies, kernels in (("tiny", 20, ["tiny"]), ("big", 10, ["big"]),
                                  ("many", 5, [f"k{i}" for i in range(64)])):
        with open(os.path.join(folder, name + ".cubin"), "rb") as f:
            image = f.read()
        mods = []

        def load(image=image, copies=copies, mods=mods):
            for _ in range(copies):
                m = vp()
                assert cuda.cuModuleLoadData(ctypes.byref(m), image) == 0
                mods.append(m)

        def launch(kernels=kernels, mods=mods):
            for m in mods:
                for k in kernels:
                    fn = vp()
                    assert cuda.cuModuleGetFunction(ctypes.byref(fn), m, k.encode()) == 0
                    assert cuda.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, None, params, None) == 0

        def unload(mods=mods):
            for m in mods:
                cuda.cuModuleUnload(m)

        out.append({"cubin": name, "bytes": len(image), "copies": copies,
                    "kernels": len(kernels), "load": driver_delta(load),
                    "launch": driver_delta(launch), "unload": driver_delta(unload)})
    return out


def sweep_main(argv: list[str]) -> int:
    """One fresh process per point: a one-node graph (the context's one-time graph cost),
    then one graph of N nodes of one op, or N loaded-and-launched copies of one cubin; prints
    the driver MiB of each step as one JSON line."""
    import torch

    kind, what, n = argv[0], argv[1], int(argv[2])
    cuda = ctypes.CDLL("libcuda.so.1")
    torch.empty(1, device="cuda")

    def used() -> int:
        torch.cuda.synchronize()
        f, _ = torch.cuda.mem_get_info()
        return -f - torch.cuda.memory_reserved()

    row: dict[str, object] = {"kind": kind, "what": what, "n": n}
    if kind == "graphs":  # argv[3] graphs of n nodes each, all kept
        ops = graph_ops()
        for op in ops.values():
            op()
        keep = [torch.cuda.CUDAGraph()]
        with torch.cuda.graph(keep[0]):
            ops["add"]()
        u1 = used()
        for _ in range(int(argv[3])):
            keep.append(torch.cuda.CUDAGraph())
            with torch.cuda.graph(keep[-1]):
                for _ in range(n):
                    ops[what]()
        row.update(graphs=int(argv[3]), graphs_mib=(used() - u1) / MIB)
    elif kind == "graph":
        ops = graph_ops()
        for op in ops.values():
            op()
        u0 = used()
        g1 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g1):
            ops["add"]()
        u1 = used()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(n):
                ops[what]()
        u2 = used()
        row.update(first_graph_mib=(u1 - u0) / MIB, graph_mib=(u2 - u1) / MIB)
    elif kind == "first":  # <what> first (a cluster launch, a plain launch), then a graph
        x = torch.zeros(1024, device="cuda")
        u0 = used()
        if what == "cluster":
            fn = load_function(cuda, os.path.join(argv[3], "cluster.cubin"), "cluster")
            ptr = ctypes.c_void_p(x.data_ptr())
            params = (ctypes.c_void_p * 1)(ctypes.addressof(ptr))
            assert cuda.cuLaunchKernel(fn, 2, 1, 1, 32, 1, 1, 0, None, params, None) == 0
        else:
            x.add_(1.0)
        u1 = used()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            x.add_(1.0)
        row.update(first_mib=(u1 - u0) / MIB, then_graph_mib=(used() - u1) / MIB)
    elif kind == "pgraph":  # N launches of params.cubin's p<what>(struct of <what> bytes, x)
        fn = load_function(cuda, os.path.join(argv[3], "params.cubin"), f"p{what}")
        blob = (ctypes.c_ubyte * int(what))()
        x = torch.zeros(1024, device="cuda")
        ptr = ctypes.c_void_p(x.data_ptr())
        params = (ctypes.c_void_p * 2)(ctypes.addressof(blob), ctypes.addressof(ptr))
        g1 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g1):
            x.add_(1.0)
        u1 = used()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
            for _ in range(n):
                assert cuda.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream, params, None) == 0
        row.update(graph_mib=(used() - u1) / MIB)
    else:  # N loaded copies of <what>.cubin (code.cubin: argv[4] names the one kernel used)
        with open(os.path.join(argv[3], what + ".cubin"), "rb") as f:
            image = f.read()
        kernels = ([f"k{i}" for i in range(64)] if what == "many" else
                   [argv[4]] if len(argv) > 4 else [what])
        row["kernels"] = kernels if len(kernels) == 1 else len(kernels)
        vp = ctypes.c_void_p
        buf = torch.zeros(1024, device="cuda")
        arg = vp(buf.data_ptr())
        params = (vp * 1)(ctypes.addressof(arg))
        u0, mods = used(), []
        for _ in range(n):
            m = vp()
            assert cuda.cuModuleLoadData(ctypes.byref(m), image) == 0
            for k in kernels:
                fn = vp()
                assert cuda.cuModuleGetFunction(ctypes.byref(fn), m, k.encode()) == 0
                assert cuda.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, None, params, None) == 0
            mods.append(m)
        row.update(bytes=len(image), modules_mib=(used() - u0) / MIB)
    print(json.dumps(row), flush=True)
    return 0


def load_function(cuda, path: str, name: str) -> ctypes.c_void_p:
    with open(path, "rb") as f:
        image = f.read()
    m, fn = ctypes.c_void_p(), ctypes.c_void_p()
    assert cuda.cuModuleLoadData(ctypes.byref(m), image) == 0
    assert cuda.cuModuleGetFunction(ctypes.byref(fn), m, name.encode()) == 0
    return fn


def graph_ops() -> dict[str, object]:
    import torch

    x = torch.zeros(1024, device="cuda")
    src, dst = torch.zeros(32, 32, device="cuda"), torch.zeros(32, 32, device="cuda")
    parts = [torch.zeros(16, device="cuda") for _ in range(64)]
    out = torch.empty(16 * 64, device="cuda")
    return {"add": lambda: x.add_(1.0), "strided_copy": lambda: dst.copy_(src.t()),
            "cat64": lambda: torch.cat(parts, out=out)}


# Test kernels: one small kernel; one with 1.8 MB of code; 64 small kernels in one module;
# kernels with 64 B..8 KiB of parameters; kernels with 0.8, 8, 33 and 131 KB of code.
def _unrolled(n: int) -> str:
    return "\n".join(f"    v = fmaf(v, {1.0001 + i * 1e-6:.7f}f, {i * 1e-3:.4f}f);"
                     for i in range(n))


CUBINS = {
    "tiny": 'extern "C" __global__ void tiny(float *x) { x[threadIdx.x] += 1.f; }\n',
    "big": ('extern "C" __global__ void big(float *x) {\n    float v = x[threadIdx.x];\n'
            + "\n".join(f"    v = fmaf(v, {1.0001 + i * 1e-6:.7f}f, {i * 1e-3:.4f}f); "
                        f"if (v > {1000 + i}.f) v = sqrtf(v);" for i in range(6000))
            + "\n    x[threadIdx.x] = v;\n}\n"),
    "many": "".join(f'extern "C" __global__ void k{i}(float *x) {{ x[threadIdx.x] = '
                    f"x[threadIdx.x] * {i + 2}.f + {i}.f; }}\n" for i in range(64)),
    "params": "".join(f"struct P{b} {{ unsigned char b[{b}]; }};\n"
                      f'extern "C" __global__ void p{b}(P{b} p, float *x) '
                      f"{{ x[threadIdx.x] += p.b[threadIdx.x % {b}]; }}\n"
                      for b in (64, 512, 1024, 1536, 2048, 3072, 4096, 8192)),
    "cluster": ('extern "C" __global__ void __cluster_dims__(2, 1, 1) cluster(float *x) '
                '{ x[threadIdx.x + 32 * blockIdx.x] += 1.f; }\n'),
    "code": "".join(f'extern "C" __global__ void c{n}(float *x) {{\n    float v = x[threadIdx.x];'
                    f"\n{_unrolled(n)}\n    x[threadIdx.x] = v;\n}}\n"
                    for n in (16, 256, 1024, 4096)),
}

# Every sweep point as the arguments of `_point` (one fresh process each).
POINTS = (
    [["graph", op, str(n)] for op in ("add", "strided_copy", "cat64")
     for n in (1000, 2000, 4000, 8000, 16000, 32000)]
    + [["pgraph", str(b), "8000", "{cubins}"] for b in (64, 512, 1024, 1536, 2048, 3072, 4096,
                                                         8192)]
    + [["graphs", "add", str(n), str(k)] for n, k in ((1, 10), (1, 100), (1, 500), (100, 10),
                                                       (100, 100), (1000, 10))]
    + [["module", what, str(n), "{cubins}"] for what, n in (
        ("tiny", 20), ("tiny", 200), ("tiny", 1000), ("tiny", 2000), ("many", 1), ("many", 5),
        ("many", 20), ("big", 1), ("big", 2), ("big", 5))]
    + [["first", what, "1", "{cubins}"] for what in ("cluster", "add")]
    + [["module", "code", str(n), "{cubins}", f] for f, n in (
        ("c16", 400), ("c256", 400), ("c1024", 400), ("c4096", 400), ("c4096", 40))])


def build_cubins(folder: str) -> int:
    nvcc = os.environ.get("NVCC", "/usr/local/cuda-13.0/bin/nvcc")
    os.makedirs(folder, exist_ok=True)
    for name, source in CUBINS.items():
        src = os.path.join(folder, name + ".cu")
        with open(src, "w") as f:
            f.write(source)
        subprocess.run([nvcc, "-cubin", "-arch=sm_90", "-O2", "-o",
                        os.path.join(folder, name + ".cubin"), src], check=True)
    return 0


def sweep(cubins: str) -> int:
    for point in POINTS:
        args = [a.format(cubins=cubins) for a in point]
        subprocess.run([sys.executable, os.path.abspath(__file__), "_point", *args], check=True)
    return 0


def main() -> int:
    if sys.argv[1:2] == ["_point"]:
        return sweep_main(sys.argv[2:])
    if sys.argv[1:2] == ["cubins"]:
        return build_cubins(sys.argv[2])
    if sys.argv[1:2] == ["sweep"]:
        return sweep(sys.argv[sys.argv.index("--cubins") + 1])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out")
    p.add_argument("--cubins", help="folder with tiny.cubin, big.cubin, many.cubin")
    args = p.parse_args()
    import torch

    cuda = ctypes.CDLL("libcuda.so.1")
    torch.cuda.init()
    torch.empty(1, device="cuda")  # the primary context

    def free() -> int:
        torch.cuda.synchronize()
        return torch.cuda.mem_get_info()[0]

    def driver_delta(fn) -> dict[str, float]:
        """MiB the driver took during fn (free-memory drop minus torch's reservations)."""
        torch.cuda.synchronize()
        f0, r0 = free(), torch.cuda.memory_reserved()
        out = fn()
        f1, r1 = free(), torch.cuda.memory_reserved()
        return {"driver_mib": ((f0 - f1) - (r1 - r0)) / MIB, "torch_mib": (r1 - r0) / MIB,
                **(out or {})}

    result: dict[str, object] = {
        "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
        "cuda": torch.version.cuda, "module_loading": os.environ.get("CUDA_MODULE_LOADING"),
        "sm_count": torch.cuda.get_device_properties(0).multi_processor_count,
        "max_threads_per_sm": torch.cuda.get_device_properties(0).max_threads_per_multi_processor}

    # Thread stacks.
    stack = ctypes.c_size_t()
    cuda.cuCtxGetLimit(ctypes.byref(stack), CU_LIMIT_STACK_SIZE)
    result["stack_default"] = stack.value
    steps = []
    for s in (2048, 4096, 8192, 1024, 16384):
        d = driver_delta(lambda s=s: {"rc": cuda.cuCtxSetLimit(CU_LIMIT_STACK_SIZE,
                                                                ctypes.c_size_t(s))})
        cuda.cuCtxGetLimit(ctypes.byref(stack), CU_LIMIT_STACK_SIZE)
        steps.append({"set": s, "now": stack.value, **d})
    cuda.cuCtxSetLimit(CU_LIMIT_STACK_SIZE, ctypes.c_size_t(1024))
    steps.append({"set": 1024, "now": 1024, "driver_mib_total_from_start": None})
    result["stack"] = steps

    # CUDA graphs: a one-node graph first (what the first graph of a context costs), then
    # large graphs of kernels with small, medium and large parameter blocks, each
    # instantiated, destroyed and instantiated again (does the driver reuse the memory?).
    ops = graph_ops()
    for op in ops.values():  # load the kernels before measuring graphs
        op()
    graphs = []

    def graph_of(op, n, holder):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(n):
                op()
        holder["g"] = g

    def destroy(holder):
        holder["g"].reset()
        del holder["g"]
        torch.cuda.empty_cache()

    for name, n in (("add", 1), ("add", 20000), ("strided_copy", 20000), ("cat64", 20000),
                    ("add", 5000), ("cat64", 5000)):
        op, holder = ops[name], {}
        made = driver_delta(partial(graph_of, op, n, holder))
        replay = driver_delta(holder["g"].replay)
        gone = driver_delta(partial(destroy, holder))
        again = driver_delta(partial(graph_of, op, n, holder))
        gone2 = driver_delta(partial(destroy, holder))
        graphs.append({"op": name, "nodes": n, "instantiate": made, "first_replay": replay,
                       "destroy": gone, "instantiate_again": again, "destroy_again": gone2})
    result["graphs"] = graphs

    # Modules (cubins built with nvcc -cubin -arch=sm_90: tiny, big (1.8 MB of code), many
    # (64 kernels)): loaded, each kernel fetched and launched once, unloaded.
    if args.cubins:
        result["modules"] = modules(cuda, args.cubins, driver_delta)

    # Lazily loaded kernels and cuBLAS.
    y = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    firsts = {}
    for name, fn in (("sort", lambda: torch.sort(y[:64], dim=-1)),
                     ("topk", lambda: torch.topk(y[:64].float(), 50, dim=-1)),
                     ("cumsum", lambda: torch.cumsum(y[:64].float(), dim=-1)),
                     ("softmax", lambda: torch.softmax(y[:64].float(), dim=-1)),
                     ("layer_norm", lambda: torch.nn.functional.layer_norm(y, (4096,))),
                     ("matmul_bf16", lambda: y @ y),
                     ("matmul_bf16_again", lambda: y @ y),
                     ("matmul_f32", lambda: y[:256].float() @ y[:256].float().T),
                     ("sdpa", lambda: torch.nn.functional.scaled_dot_product_attention(
                         *(torch.randn(1, 8, 128, 128, device="cuda", dtype=torch.bfloat16),) * 3,
                         is_causal=True))):
        firsts[name] = driver_delta(lambda fn=fn: (fn(), None)[1])
    result["first_use"] = firsts
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "driver_memory.json"), "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
