"""vLLM at TP 2 on one core against two (issue #26, item 1): the engine core, its two
workers, the API server and the client take turns on one core, and the clock rate still
counts each one's CPU work as the GPU node's core to itself would run it.

One emulated TP 2 server, in a module of its own so that no idle shared server competes with
it for the host's cores: a load on every CPU of this process's affinity, then the same load
with every thread of the deployment, of the client and of this process (the Timekeeper)
moved onto one CPU and the Timekeeper told so, as on a one-core host."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from revati.bench.options import BenchOptions
from revati.bench.server import EmulatedServer

pytestmark = pytest.mark.e2e

# How far one core may move mean TPOT and output throughput from two, for this load (16
# requests at once, 128 tokens in, 256 out, after 16 warm-ups of that shape). Seen, one core
# against two on the same server, one pair each: TPOT -10.3 %, +21.4 % and +13.1 %, throughput
# +12.1 %, -15.8 % and -9.8 % on a quiet 2-core host; TPOT +11.7 % and throughput -7.8 % with a
# busy process on each core. The run-to-run spread is that wide on two cores alone (TPOT
# 4.47-5.83 ms, the same load twice). Told two cores while on one, as a clock rate blind to the
# core count would be, the load read TPOT +103 % and throughput -49 % (quiet host).
ONE_CORE_BOUND = 0.3


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    opts = BenchOptions(model="llama3_8b", hardware="h200", out=tmp_path_factory.mktemp("srv"),
                        tp=2, engine_args=["--max-model-len", "4096"], ready_timeout_s=1200)
    with EmulatedServer(opts) as srv:
        yield srv


def _move(server: EmulatedServer, cpus: set[int]) -> None:
    """Every thread of the deployment and of this process onto cpus (the clients run_load
    starts inherit it), and the clock rate's core count with them."""
    for pid in server.dep.tree.pids() | {os.getpid()}:
        with contextlib.suppress(OSError):  # a process or thread that ended meanwhile
            for tid in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(int(tid), cpus)
    server.dep.tk.set_cores(len(cpus))


def test_two_workers_hold_half_the_weights_each(server: EmulatedServer) -> None:
    # Llama-3.1-8B at TP 1 holds ~57k blocks of 16 tokens (test_vllm_e2e.py); half the
    # weights per GPU leave more than twice the room for KV
    assert server.num_gpu_blocks is not None and server.num_gpu_blocks > 100_000


def test_one_core_reads_as_two(server: EmulatedServer, tmp_path: Path) -> None:
    cpus = os.sched_getaffinity(0)
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")

    def load(name: str) -> dict:
        opts = BenchOptions(model="llama3_8b", hardware="h200", out=tmp_path / name,
                            input_len=128, output_len=256, num_prompts=16,
                            request_rate=float("inf"), seed=3, num_warmups=16)
        s = server.run_load(opts, tmp_path / name)
        assert s["completed"] == 16 and s["total_output_tokens"] == 16 * 256
        return s

    two = load("two")
    _move(server, {min(cpus)})
    try:
        one = load("one")
    finally:
        _move(server, cpus)
    print(f"two/one core: TPOT {two['mean_tpot_ms']:.3f}/{one['mean_tpot_ms']:.3f} ms, "
          f"{two['output_throughput']:.1f}/{one['output_throughput']:.1f} tok/s, TTFT "
          f"{two['mean_ttft_ms']:.2f}/{one['mean_ttft_ms']:.2f} ms")
    assert (two["revati"]["cores"], one["revati"]["cores"]) == (len(cpus), 1)
    assert one["mean_tpot_ms"] == pytest.approx(two["mean_tpot_ms"], rel=ONE_CORE_BOUND)
    assert one["output_throughput"] == pytest.approx(two["output_throughput"],
                                                     rel=ONE_CORE_BOUND)
