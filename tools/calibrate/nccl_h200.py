"""Time NCCL's collectives on a multi-GPU H200 node (issue #26, item 3: collectives measured,
not guessed).

    python3 tools/calibrate/nccl_h200.py OUT.jsonl [--ranks 2,4,8] [--max-mib 256]

on the GPU machine (torch with CUDA and NCCL; the device tool's nvidia-h200-x2/-x4/-x8).
For each rank count up to the GPUs present, one process per GPU runs all_reduce (sum),
all_gather, reduce_scatter and broadcast of bf16 tensors from 1 KiB to --max-mib MiB (per
rank's input, powers of 4), and a send/recv pair between rank 0 and rank 1, as torch calls
them (the engines' NCCL path). Each point: 5 warm-up calls, then the median of 20, each
timed by CUDA events around the call alone (launch gaps included), and its NCCL kernels'
durations from Kineto (what the emulator predicts). One JSON line per point: op, ranks,
bytes, median, min and max microseconds, the kernels' median and names, with NCCL's
version and the environment in the first line. Run on one H200 only so far (--ranks 1:
NCCL launches no kernel there; events read 35-45 us, torch's launch path): the multi-rank
kernels' parsing is untried.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys

WARMUP, REPS = 5, 20


def sizes(max_mib: int) -> list[int]:
    out, b = [], 1024
    while b <= max_mib << 20:
        out.append(b)
        b *= 4
    return out


def collectives(dist, x, gathered, big, rank: int, world: int) -> dict:
    """op name -> a call of it on this rank's tensors."""
    ops = {"all_reduce": lambda: dist.all_reduce(x),
           "all_gather": lambda: dist.all_gather_into_tensor(gathered, x),
           "reduce_scatter": lambda: dist.reduce_scatter_tensor(x, big),
           "broadcast": lambda: dist.broadcast(x, 0)}
    if world == 2:
        ops["send_recv"] = (lambda: dist.send(x, 1)) if rank == 0 else (lambda: dist.recv(x, 0))
    return ops


def worker(rank: int, world: int, port: int, args: argparse.Namespace, q) -> None:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, device_id=torch.device("cuda", rank))

    def timed(fn) -> tuple[list[float], list[float], list[str]]:
        """Per call: the time between CUDA events around it (the GPU's view, launch gaps
        included), and the durations and names of its NCCL kernels (Kineto)."""
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile

        for _ in range(WARMUP):
            fn()
        torch.cuda.synchronize()
        times = []
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(REPS):
                dist.barrier()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b) * 1e3)  # ms -> us
        # the barrier's own kernel is a one-element all-reduce of another dtype than bf16
        kernels = [e for e in prof.events() if e.device_type == DeviceType.CUDA
                   and "nccl" in e.name.lower()
                   and not ("AllReduce" in e.name and "bf16" not in e.name)]
        return times, [e.device_time for e in kernels], sorted({e.name for e in kernels})

    for nbytes in sizes(args.max_mib):
        n = nbytes // 2  # bf16 elements per rank's input
        x = torch.ones(n, dtype=torch.bfloat16, device="cuda")
        gathered = torch.empty(n * world, dtype=torch.bfloat16, device="cuda")
        big = torch.ones(n * world, dtype=torch.bfloat16, device="cuda")
        for op, fn in collectives(dist, x, gathered, big, rank, world).items():
            t, k, names = timed(fn)
            if rank == 0:
                q.put({"op": op, "ranks": world, "bytes": nbytes,
                       "median_us": statistics.median(t), "min_us": min(t), "max_us": max(t),
                       "kernel_median_us": statistics.median(k) if k else None,
                       "kernels_per_call": len(k) / REPS, "kernel_names": names})
        del x, gathered, big
        torch.cuda.empty_cache()
    if rank == 0:
        q.put(None)  # done: the parent reads until this before joining
    dist.destroy_process_group()


def main() -> int:
    import torch
    import torch.multiprocessing as mp

    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--ranks", default="2,4,8")
    p.add_argument("--max-mib", type=int, default=256)
    args = p.parse_args()
    gpus = torch.cuda.device_count()
    ctx = mp.get_context("spawn")
    with open(args.out, "w") as f:
        f.write(json.dumps({"gpu": torch.cuda.get_device_name(0), "gpus": gpus,
                            "torch": torch.__version__, "nccl": ".".join(
                                map(str, torch.cuda.nccl.version())),
                            "date": datetime.datetime.now(datetime.UTC).isoformat(),
                            "command": " ".join(["python3", *sys.argv]),
                            "env": {k: v for k, v in os.environ.items()
                                    if k.startswith(("NCCL_", "TORCH_"))}}) + "\n")
        for world in (int(r) for r in args.ranks.split(",")):
            if world > gpus:
                continue
            q = ctx.Queue()
            procs = [ctx.Process(target=worker, args=(r, world, 29500 + world, args, q))
                     for r in range(world)]
            for pr in procs:
                pr.start()
            while (row := q.get()) is not None:
                f.write(json.dumps(row) + "\n")
                f.flush()
                print(f"{row['op']:>14} x{world} {row['bytes']:>10} B "
                      f"{row['median_us']:9.1f} us, kernel {row['kernel_median_us']} us",
                      flush=True)
            for pr in procs:
                pr.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
