"""What launching GPU work costs the launching thread's CPU: one eager PyTorch op (dispatch and
kernel launch) and one replay of a CUDA graph of 450 kernels (about a Llama-3.1-8B decode
step's), in thread CPU time, the median of 5 rounds. Run it on the GPU node (the real driver)
and under the emulator (the device shim and the predictor) to compare:

    python tools/calibrate/launch_cpu.py                                  # on the GPU machine
    .venv/bin/revati run --hardware h200_sxm -- .venv/bin/python tools/calibrate/launch_cpu.py

Prints one JSON line: eager_us (per op), graph_replay_us (per replay of 450 kernels).
"""

import json
import statistics
import time

import torch

OPS, REPLAYS, NODES = 2000, 100, 450


def eager_us() -> float:
    x = torch.ones(1024, device="cuda")
    torch.cuda.synchronize()
    rounds = []
    for _ in range(5):
        c0 = time.thread_time()
        for _ in range(OPS):
            x = x + 1
        rounds.append((time.thread_time() - c0) / OPS * 1e6)
        torch.cuda.synchronize()
    return statistics.median(rounds)


def graph_replay_us() -> float:
    x = torch.ones(1024, device="cuda")
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = x + 1  # warms the kernel up outside the capture
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            y = x
            for _ in range(NODES):
                y = y + 1
    torch.cuda.synchronize()
    rounds = []
    for _ in range(5):
        c0 = time.thread_time()
        for _ in range(REPLAYS):
            graph.replay()
        rounds.append((time.thread_time() - c0) / REPLAYS * 1e6)
        torch.cuda.synchronize()
    return statistics.median(rounds)


if __name__ == "__main__":
    print(json.dumps({"eager_us": round(eager_us(), 2),
                      "graph_replay_us": round(graph_replay_us(), 1),
                      "device": torch.cuda.get_device_name(0)}))
