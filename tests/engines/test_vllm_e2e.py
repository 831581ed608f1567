"""The real vLLM on an emulated H200, end to end, with its V1 model runner
(`VLLM_USE_V2_MODEL_RUNNER=0`, as the real runs of docs/validation.md): the busy-host bound
below was measured with it. vLLM's default V2 runner is what every other vLLM test runs
(test_vllm_bench_command.py checks its lengths and KV cache against a real server).

One emulated `vllm serve` is shared by the tests of this module (starting one takes a
couple of minutes on two cores: torch.compile, CUDA-graph capture, all real)."""

from __future__ import annotations

import contextlib
import csv
import ipaddress
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from revati.bench.options import BenchOptions
from revati.bench.server import EmulatedServer
from tests.engines.conftest import post

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    opts = BenchOptions(model="llama3_8b", hardware="h200", out=tmp_path_factory.mktemp("srv"),
                        engine_args=["--max-model-len", "4096"], ready_timeout_s=1200)
    with pytest.MonkeyPatch.context() as env:   # the engine inherits it
        env.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")
        with EmulatedServer(opts) as srv:
            yield srv


def test_completion_has_exactly_max_tokens(server: EmulatedServer) -> None:
    out = post(server, "/v1/completions", {"model": str(server.folder.model_dir),
                                           "prompt": "t1 t2 t3 t4 t5 t6 t7", "max_tokens": 20,
                                           "ignore_eos": True})
    assert out["usage"] == {"prompt_tokens": 7, "completion_tokens": 20, "total_tokens": 27,
                            "prompt_tokens_details": None}
    assert out["choices"][0]["finish_reason"] == "length"


def test_chat_completion_has_exactly_max_tokens(server: EmulatedServer) -> None:
    out = post(server, "/v1/chat/completions", {
        "model": str(server.folder.model_dir),
        "messages": [{"role": "user", "content": "t10 t11 t12"}],
        "max_tokens": 12, "ignore_eos": True})
    assert out["usage"]["completion_tokens"] == 12
    assert out["choices"][0]["message"]["role"] == "assistant"


def test_engine_reports_kv_cache_blocks(server: EmulatedServer) -> None:
    # Llama-3.1-8B on an H200 at the default 0.9 memory utilisation holds ~57k blocks of
    # 16 tokens; the exact real-GPU figure is in docs/validation.md
    assert server.num_gpu_blocks is not None and 40_000 < server.num_gpu_blocks < 70_000


def _listening(pid: int) -> list[str]:
    """The addresses pid's listening TCP sockets are bound to, read in its own namespace."""
    fd_dir = Path(f"/proc/{pid}/fd")
    inodes = set()
    for fd in fd_dir.iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = []
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        for row in (Path(f"/proc/{pid}/net") / table).read_text().splitlines()[1:]:
            local, state, inode = row.split()[1], row.split()[3], row.split()[9]
            if state == "0A" and inode in inodes:  # 0A: LISTEN
                raw = bytes.fromhex(local.split(":")[0])
                # the kernel prints each 32-bit word of the address in host (little) order
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                found.append(socket.inet_ntop(family, raw))
    return found


def _loopback(addr: str) -> bool:
    ip = ipaddress.ip_address(addr)
    return (getattr(ip, "ipv4_mapped", None) or ip).is_loopback


def test_nothing_listens_beyond_loopback(server: EmulatedServer) -> None:
    """Issue #27: an emulation run exposes nothing. vLLM's torch.distributed store binds
    every interface; in the deployment's own namespace loopback is the only one there is."""
    assert server.dep is not None
    listeners = []
    for pid in server.dep.tree.pids():
        with contextlib.suppress(OSError):  # a process that ended meanwhile
            ifaces = [ln.split(":")[0].strip()
                      for ln in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]]
            listeners += [(pid, addr, ifaces) for addr in _listening(pid)]
    assert listeners, "the server listens somewhere"
    exposed = [(pid, addr) for pid, addr, ifaces in listeners
               if ifaces != ["lo"] and not _loopback(addr)]
    assert exposed == [], f"listening beyond loopback in {server.dep.network.where}"


def test_bench_summary_is_complete_and_consistent(server: EmulatedServer,
                                                  tmp_path: Path) -> None:
    opts = BenchOptions(model="llama3_8b", hardware="h200", out=tmp_path, input_len=128,
                        output_len=32, num_prompts=20, request_rate=10.0, seed=1)
    s = server.run_load(opts, tmp_path)
    for key in ("mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms",
                "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "p99_itl_ms", "mean_e2el_ms",
                "request_throughput", "output_throughput", "total_token_throughput",
                "duration", "completed", "total_input_tokens", "total_output_tokens",
                "wall_s", "measured_wall_s", "num_gpu_blocks", "predictor_coverage"):
        assert key in s, key
    assert s["completed"] == 20
    # the measured requests are part of what the client did, which also started up
    assert 0 < s["measured_wall_s"] < s["wall_s"]
    # this host's CPU speed, before and after, beside the GPU node's (revati/conf/hardware)
    host = s["revati"]["host_cpu_ms"]
    assert host["gpu_node"] == 17.3 and 1 < host["before"] < 1000 and 1 < host["after"] < 1000
    # GPU-driving threads count their CPU time at the node's PyTorch dispatch speed over the
    # clock rate's (the Python workload's, timed at the same moment): each workload's fastest
    # repetition, no slower than the median reported beside it
    d = s["revati"]["cpu_dilation"]
    assert d["gpu_node_torch_ms"] == 13.6 and 1 < d["host_torch_ms"] < 1000
    assert 1 < d["host_cpu_ms"] <= host["before"]
    speed = 17.3 / d["host_cpu_ms"]
    assert d["factor"] == pytest.approx(13.6 / d["host_torch_ms"] / speed, abs=2e-3)
    assert s["total_output_tokens"] == 20 * 32
    assert s["output_throughput"] * s["duration"] == pytest.approx(20 * 32, rel=1e-6)
    assert s["request_throughput"] * s["duration"] == pytest.approx(20, rel=1e-6)
    assert 0 < s["mean_ttft_ms"] < s["mean_e2el_ms"]
    rows = list(csv.DictReader((tmp_path / "requests.csv").open()))
    assert len(rows) == 20
    assert all(int(r["output_tokens"]) == 32 and not r["error"] for r in rows)
    # one inter-token latency per streamed chunk: 31 for 32 tokens, fewer when the server
    # coalesced tokens into one chunk (it does, now and then, as on a real GPU)
    assert all(0 < len(json.loads(r["itl_ms"])) <= 31 for r in rows)
    # the predictor's figures over the measured requests alone: a part of the whole run's
    m = s["predictor_measured"]
    assert 0 <= m["unseen_kernel_share"] <= 1 and 0 < m["predictor_coverage"] <= 1
    assert m["collective_share"] == 0  # one GPU: no collective
    assert s["revati"]["collective_table"] == "published"
    # the settings the engine ran with: Revati's, and the runner this module's server chose
    env = s["revati"]["engine_env"]
    assert env["VLLM_USE_V2_MODEL_RUNNER"] == "0" and env["VLLM_USE_FLASHINFER_SAMPLER"] == "0"
    # idle connections outlive the load generator's (`vllm bench serve` pools them for 60 s)
    assert int(env["VLLM_HTTP_TIMEOUT_KEEP_ALIVE"]) > 60
    whole = server.predictor_totals()["attention_by_batch_ns"] / 1e9
    assert 0 < m["attention_by_batch_s"] < whole
    # vLLM logs any kernel it compiles while serving: a list, empty for a warm server
    assert isinstance(s["jit_during_measured"], list)
    # CPU work's share of the virtual time and the rate it ran at (issue #24, item 4): the
    # host's factor in it is the node's speed over this host's, which the probe read
    r = s["revati"]["virtual_clock"]
    assert 0 < r["rate_min"] <= r["rate_mean"] <= r["rate_max"]
    assert 0 < r["cpu_bound_share"] <= 1
    c = s["revati"]["cpu_contention"]
    assert 0 < c["host_min"] <= c["host_mean"] <= c["host_max"]
    # the factor is read throughout the run, not by the probe before it: on a loaded host
    # the two differ by more than any fixed tolerance (0.39 against 0.71 seen in CI)
    assert 0 <= c["steal_mean"] < 1


def test_trace_replay_sends_each_request_at_its_virtual_time(server: EmulatedServer,
                                                           tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    sent = [(0.0, 64, 8), (0.5, 100, 5), (2.0, 33, 12), (2.25, 200, 4)]
    trace.write_text("timestamp,input_length,output_length\n"
                     + "".join(f"{t + 40},{i},{o}\n" for t, i, o in sent))
    opts = BenchOptions(model="llama3_8b", hardware="h200", out=tmp_path, dataset="trace",
                        trace=trace, num_prompts=None)
    s = server.run_load(opts, tmp_path)
    assert s["completed"] == 4 and s["total_input_tokens"] == 397
    rows = list(csv.DictReader((tmp_path / "requests.csv").open()))
    got = [(float(r["send_time_s"]), int(r["input_tokens"]), int(r["output_tokens"]))
           for r in rows]
    assert [g[1:] for g in got] == [x[1:] for x in sent]
    # in virtual time the client sends on schedule (the trace's first 40 s skipped), never
    # early; late only by the client's own work between its wake-up and the send, host time
    # that counts on the virtual clock: under 5 ms on an idle host, 14 ms seen on a loaded one
    for (t, *_), (want, *_) in zip(got, sent, strict=True):
        assert want <= t < want + 0.05, (got, sent)
    assert s["duration"] > 2.25


def test_sharegpt_lengths_fit_the_engine_and_follow_the_seed(server: EmulatedServer,
                                                            tmp_path: Path) -> None:
    from revati.workload.datasets import sharegpt

    opts = BenchOptions(model="llama3_8b", hardware="h200", out=tmp_path, dataset="sharegpt",
                        num_prompts=6, request_rate=20.0, seed=5)
    s = server.run_load(opts, tmp_path)
    assert s["completed"] == 6 and s["failed"] == 0
    rows = list(csv.DictReader((tmp_path / "requests.csv").open()))
    assert [(int(r["input_tokens"]), int(r["output_tokens"])) for r in rows] == [
        (r.input_len, r.output_len) for r in sharegpt(6, 5, max_len=4096)]


# How far a busy host may move mean TPOT and output throughput (issue #24, done-when 4; docs/
# testing.md, "What a test may assert"). Seen: 1.3 % (TPOT) and 0.3 % (throughput) with a busy
# process per core already running, as .ci/stress runs it; single runs of the host-state
# benchmark (docs/validation.md, "The same answer on any host") up to 5.8 % on TPOT on a host
# slower than the node (24 ms); +12.6 % TPOT and -1.2 % throughput in a fresh-clone CI on a
# host faster than it (12 ms against 17.3), so twice that. The busy load without the contention
# correction would have counted its 13.6 contended real seconds in full, not as 6.4 virtual
# ones, in a load of a few virtual seconds: a far larger error than the bound. With the
# deployment ahead of the busy processes (nice -10, docs/timewarp.md, "Priority"): TPOT -3.7 %,
# throughput +0.1 % on that host; with the busy processes at the deployment's priority (they
# inherited it from this process in a fresh-clone CI of 57dcae1) TPOT read +50 %.
BUSY_HOST_BOUND = 0.25


def test_a_busy_host_leaves_tpot_and_throughput_alone(server: EmulatedServer,
                                                      tmp_path: Path) -> None:
    """The same load, then again with a busy process pinned to each core competing at the
    same priority: the clock rate counts the engine's CPU work at the GPU node's speed with a
    core to itself, so the emulated figures hold while the host's speed halves."""
    def load(name: str) -> dict:
        opts = BenchOptions(model="llama3_8b", hardware="h200", out=tmp_path / name,
                            input_len=256, output_len=64, num_prompts=32, request_rate=16.0,
                            seed=3, num_warmups=4)
        return server.run_load(opts, tmp_path / name)

    quiet = load("quiet")
    busy = [subprocess.Popen(["taskset", "-c", str(c), sys.executable, "-c", "while True: pass"])
            for c in os.sched_getaffinity(0)]
    try:
        loaded = load("busy")
    finally:
        for p in busy:
            p.kill()
            p.wait()
    print(f"quiet/busy: TPOT {quiet['mean_tpot_ms']:.3f}/{loaded['mean_tpot_ms']:.3f} ms, "
          f"{quiet['output_throughput']:.1f}/{loaded['output_throughput']:.1f} tok/s, TTFT "
          f"{quiet['mean_ttft_ms']:.2f}/{loaded['mean_ttft_ms']:.2f} ms")
    assert loaded["completed"] == quiet["completed"] == 32
    # its first batches of 16 and more: compiled in the server's warm-up batches, not here
    assert quiet["jit_during_measured"] == loaded["jit_during_measured"] == []
    assert loaded["mean_tpot_ms"] == pytest.approx(quiet["mean_tpot_ms"], rel=BUSY_HOST_BOUND)
    assert loaded["output_throughput"] == pytest.approx(quiet["output_throughput"],
                                                        rel=BUSY_HOST_BOUND)
