"""torch.distributed over the emulated NCCL: several processes, one emulated GPU each."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from revati.ports import free_port
from tests.host import stolen_s

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="torch (CUDA build) not installed")]

D_NS = 5_000_000  # every operation, collectives included, takes 5 ms

PRELUDE = """
import json, os, time, torch, torch.distributed as dist
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
torch.cuda.set_device(rank)
dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
x = torch.ones(1 << 20, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
"""
EPILOGUE = """
dist.barrier()
dist.destroy_process_group()
print(json.dumps(out))
"""


def ranks(emulated, body: str, world: int, epilogue: str = EPILOGUE) -> list[dict]:
    script = emulated.workdir / "rank.py"
    script.write_text(PRELUDE + body + epilogue)
    port = str(free_port())
    stolen0 = stolen_s()
    procs = [subprocess.Popen(
        [sys.executable, str(script)], cwd=emulated.workdir, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=emulated.env(world, REVATI_PREDICT_FIXED_NS=str(D_NS), RANK=str(r),
                         WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=port))
        for r in range(world)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    emulated.stolen_s = stolen_s() - stolen0
    return results


def test_ranks_killed_without_destroying_leave_no_segment(emulated):
    """A communicator's shared-memory name is removed once every rank has joined, so ranks
    that die without destroying it (SIGKILL at the end of a run) leave nothing behind."""
    out = ranks(emulated, "", 2, epilogue="""
print(json.dumps({"pid": os.getpid()}), flush=True)
os._exit(0)
""")
    left = [f for f in os.listdir("/dev/shm")
            if any(f.startswith(f"revati-nccl-{o['pid']}-") for o in out)]
    assert left == []


def test_collective_completes_at_the_latest_arrival(emulated):
    out = ranks(emulated, """
if rank == 0:
    time.sleep(0.3)   # rank 0 reaches the all-reduce 300 ms after rank 1
t0 = time.perf_counter()
dist.all_reduce(x)
torch.cuda.synchronize()
waited = time.perf_counter() - t0
gathered = [torch.empty_like(x) for _ in range(world)]
t0 = time.perf_counter()
dist.all_gather(gathered, x)
if rank == 0:
    dist.send(x, 1)
else:
    dist.recv(x, 0)
torch.cuda.synchronize()
out = {"waited": waited, "more": time.perf_counter() - t0}
""", world=2)
    assert 0.005 <= out[0]["waited"] < 0.005 + 0.05 + emulated.stolen_s
    # the ranks start their clocks a few ms apart (the first all-reduce aligns them)
    assert 0.305 - 0.02 <= out[1]["waited"] < 0.305 + 0.08 + emulated.stolen_s
    # the p2p communicator is created here
    assert all(0.010 <= r["more"] < 0.5 + emulated.stolen_s for r in out)


def test_grouped_point_to_point_exchange_does_not_deadlock(emulated):
    out = ranks(emulated, """
peer_next, peer_prev = (rank + 1) % world, (rank - 1) % world
y = torch.empty_like(x)
t0 = time.perf_counter()
ops = [dist.P2POp(dist.isend, x, peer_next), dist.P2POp(dist.irecv, y, peer_prev)]
for work in dist.batch_isend_irecv(ops):
    work.wait()
torch.cuda.synchronize()
out = {"ring": time.perf_counter() - t0}
""", world=3)
    assert all(0.005 <= r["ring"] < 0.010 + 0.05 + emulated.stolen_s for r in out)


def test_captured_collectives_rendezvous_at_every_replay(emulated):
    out = ranks(emulated, """
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    dist.all_reduce(x)
torch.cuda.current_stream().wait_stream(s)
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    for _ in range(4):
        dist.all_reduce(x)
torch.cuda.synchronize()
if rank == 1:
    time.sleep(0.2)
t0 = time.perf_counter()
for _ in range(5):
    g.replay()
torch.cuda.synchronize()
out = {"replay": time.perf_counter() - t0}
""", world=2)
    assert 0.100 <= out[1]["replay"] < 0.100 + 0.05 + emulated.stolen_s  # 20 all-reduces of 5 ms
    # ... after waiting for rank 1 (whose clock starts a few ms apart)
    assert 0.300 - 0.02 <= out[0]["replay"] < 0.300 + 0.08 + emulated.stolen_s


@pytest.mark.parametrize("world", [4, 8])
def test_every_collective_completes_on_larger_groups(emulated, world):
    """All of torch.distributed's collectives and point-to-point across 4 and 8 ranks; each
    collective ends for every rank at the same virtual time (latest arrival + duration)."""
    out = ranks(emulated, """
out = {}
y = torch.ones(1 << 16, device="cuda")
chunks = list(torch.ones(world << 12, device="cuda").chunk(world))
ops = {
    "all_reduce": lambda: dist.all_reduce(y),
    "all_gather": lambda: dist.all_gather([torch.empty_like(y) for _ in range(world)], y),
    "reduce_scatter": lambda: dist.reduce_scatter(torch.empty_like(chunks[0]), chunks),
    "broadcast": lambda: dist.broadcast(y, src=0),
    "all_to_all": lambda: dist.all_to_all([torch.empty_like(c) for c in chunks], chunks),
    "send_recv": lambda: (dist.send(y, (rank + 1) % world) if rank % 2 == 0
                          else dist.recv(y, (rank - 1) % world)),
}
for name, op in ops.items():
    dist.barrier()
    torch.cuda.synchronize()
    op()
    torch.cuda.synchronize()
    out[name] = time.monotonic()
""", world=world)
    for name in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"):
        ends = [r[name] for r in out]
        assert max(ends) - min(ends) < 0.05 + emulated.stolen_s, (name, ends)
    assert all(set(r) == {"all_reduce", "all_gather", "reduce_scatter", "broadcast",
                          "all_to_all", "send_recv"} for r in out)


def test_what_a_rank_receives_reads_zero_not_what_its_memory_held(emulated):
    """A received buffer holds what other ranks' kernels computed, which reads zero here, never
    what an earlier tensor left in that memory (vLLM's pipeline stages read back sampled
    tokens a broadcast delivered: 2^32 + 1 before); a broadcast's root and a sender keep
    their own data."""
    out = ranks(emulated, """
y = torch.tensor([7 + rank] * 64, dtype=torch.int64, device="cuda")   # copied from the host
dist.broadcast(y, src=1)
z = torch.tensor([5 + rank] * 64, dtype=torch.int32, device="cuda")
if rank == 0:
    dist.send(z, 1)
else:
    dist.recv(z, 0)
torch.cuda.synchronize()
out = {"broadcast": y.tolist()[:2], "p2p": z.tolist()[:2]}
""", world=2)
    assert out[0]["broadcast"] == [0, 0] and out[1]["broadcast"] == [8, 8]
    assert out[0]["p2p"] == [5, 5] and out[1]["p2p"] == [0, 0]
