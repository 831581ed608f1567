"""Where a real CUDA driver's memory for executable graphs grows, graph by graph: graphs
captured each in a private torch memory pool or all in one shared pool on a side stream
(what vLLM does), of 1 to 450 kernel nodes, with or without a warm-up graph or extra
streams before, replayed or not.

vLLM estimates its CUDA-graph memory from the first and the second capture of each mode
(docs/validation.md, "KV-cache size"), so which capture pays a 2 MiB step of the driver
decides the estimate. Each case runs in a fresh process (a kernel run and torch's stream pool
first), captures GRAPHS graphs, and records after each instantiation the device memory
torch's allocator did not reserve:

    python3 tools/calibrate/driver_memory_graph_pools.py                  # every case
    python3 tools/calibrate/driver_memory_graph_pools.py shared,1,120,cold  # one case, this process

A case is POOL,NODES,GRAPHS[,cold][,streamsN][,replay] (POOL private or shared; cold: no
warm-up graph; streamsN: N raw streams made first), or `vllm`: two captures of 35 ten-node
graphs and two of a 450-node graph, as vLLM's estimate samples them. Each prints one line
"RESULT {json}": `steps` lists the graph counts at which the non-torch memory grew (and by
how many MiB). Run it on a real GPU and under `revati run --hardware h200_sxm`.
"""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys

import torch
from driver_memory_graphs import MIB, nontorch  # this script's own folder is on sys.path
from driver_memory_torch import cudart

CASES = ["private,1,200", "shared,1,200", "private,10,200", "shared,10,200",
         "shared,10,200,replay", "shared,40,100", "shared,450,8",
         # no warm-up graph: where each pool stands in a fresh context
         "shared,1,120,cold", "shared,1,120,cold,streams8", "shared,2,300,cold",
         "shared,5,200,cold", "shared,20,120,cold", "shared,100,40,cold", "shared,450,12,cold",
         # vLLM's estimate: two captures of 35 piecewise graphs, two full graphs
         "vllm"]


def capture(x: torch.Tensor, nodes: int, pool, side, kept: list) -> None:
    g = torch.cuda.CUDAGraph()
    kwargs = {"pool": pool, "stream": side} if pool is not None else {}
    with torch.cuda.graph(g, **kwargs):
        for _ in range(nodes):
            x.add_(1)
    kept.append(g)


def measure(case: str) -> dict[str, object]:
    x = torch.randn(1 << 16, device="cuda")
    x.add_(1)
    side = torch.cuda.Stream()   # torch's stream pool: 128 streams, as before any capture
    torch.cuda.synchronize()
    kept: list = []
    if case == "vllm":
        pool = torch.cuda.graph_pool_handle()
        groups = {}
        for name, nodes, graphs in [("P1", 10, 35), ("P2", 10, 35), ("F1", 450, 1),
                                    ("F2", 450, 1)]:
            before = nontorch()
            for _ in range(graphs):
                capture(x, nodes, pool, side, kept)
            groups[name] = (nontorch() - before) / MIB
        return {"case": case, "groups_mib": groups}
    pool_kind, nodes, graphs, *flags = case.split(",")
    nodes, graphs = int(nodes), int(graphs)
    pool = torch.cuda.graph_pool_handle() if pool_kind == "shared" else None
    if "cold" not in flags:
        capture(x, 1, None, side, kept)
    for flag in flags:
        if flag.startswith("streams"):   # raw streams of the runtime, outside torch's pool
            rt = cudart()
            for _ in range(int(flag[7:])):
                s = ctypes.c_void_p()
                assert rt.cudaStreamCreate(ctypes.byref(s)) == 0
    torch.cuda.synchronize()
    steps = []
    base = last = nontorch()
    for i in range(graphs):
        capture(x, nodes, pool, side, kept)
        now = nontorch()
        if now != last:
            steps.append([i + 1, (now - last) / MIB])
        last = now
    row: dict[str, object] = {"case": case, "total_mib": (last - base) / MIB, "steps": steps}
    if "replay" in flags:
        for g in kept:
            g.replay()
        torch.cuda.synchronize()
        row["replay_mib"] = (nontorch() - last) / MIB
    return row


if __name__ == "__main__":
    if len(sys.argv) == 1:
        for c in CASES:
            subprocess.run([sys.executable, __file__, c], check=False)
    else:
        print("RESULT", json.dumps(measure(sys.argv[1])), flush=True)
