"""`revati bench`: one emulated deployment under load, measured in virtual time.

A Timekeeper, the real engine (`vllm serve` or SGLang's server) on emulated GPUs, and the
real `vllm bench serve` as the load generator, all in one virtual time: the latencies the
client measures are what the emulated GPUs would give. Writes OUT/summary.json (every key
`vllm bench serve --save-result` writes, plus wall_s, num_gpu_blocks, predictor_coverage,
attention_by_batch_s, unseen_kernel_share, launch_only_share), OUT/requests.csv (one row per
request), and keeps OUT/engine.log and OUT/client.log."""

from __future__ import annotations

import bisect
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from revati.cache import MODELS_DIR
from revati.device.env import emulated_device_env
from revati.device.spec import UnknownHardwareError, load_spec
from revati.device.spec import resolve_hardware as spec_name
from revati.engines import ENGINES, vllm
from revati.engines.common import max_model_len
from revati.hostspeed import host_cpu_ms, torch_ms
from revati.models.catalog import UnknownModelError, load_model, resolve_name
from revati.models.folder import materialise
from revati.models.sizing import routing_env
from revati.ports import free_port, is_free
from revati.predict.totals import read_totals
from revati.timewarp.runner import emulated_env, start_notices
from revati.timewarp.timekeeper import Contention, Timekeeper, host_cores
from revati.timewarp.trace import merge_trace
from revati.timewarp.tree import ProcessTree
from revati.workload import datasets
from revati.workload.checks import check_numbers, check_options, check_requests
from revati.workload.errors import BenchError
from revati.workload.network import PrivateNetwork
from revati.workload.options import BenchOptions

REPO = Path(__file__).resolve().parents[2]
RAW_RESULT = "vllm_bench.json"
# what `vllm bench serve` prints once its warm-ups are done, before the measured requests
MEASURED_RUN = "Starting main benchmark run"
# arrays of per-request detail that go to requests.csv rather than summary.json
DETAIL_KEYS = ("input_lens", "output_lens", "ttfts", "itls", "start_times", "errors",
               "generated_texts")


def resolve_hardware(name: str) -> str:
    try:
        return spec_name(name)
    except UnknownHardwareError as e:
        raise BenchError(str(e)) from e


def find_python(engine: str, given: Path | None = None) -> Path:
    """The interpreter that has `engine`: `given` (--engine-python), $REVATI_<ENGINE>_PYTHON,
    the .venv-<engine> that scripts/install.sh makes, or this interpreter."""
    if engine not in ENGINES:
        raise BenchError(f"unknown engine {engine!r} (known: {', '.join(ENGINES)})")
    candidates = [given, os.environ.get(f"REVATI_{engine.upper()}_PYTHON"),
                  REPO / f".venv-{engine}" / "bin" / "python", Path(sys.executable)]
    python = next(Path(c) for c in candidates if c and Path(c).exists())
    if not ENGINES[engine].has_engine(python):
        raise BenchError(f"{engine} is not installed for {python}: run scripts/install.sh "
                         f"(it makes .venv-{engine}) or pass --engine-python")
    return python


def server_port(requested: int | None) -> int:
    """The API server's port: the one asked for, which must be free, or one of ports.free_port."""
    if requested is None:
        return free_port()
    if not is_free(requested):
        raise BenchError(f"port {requested} is in use")
    return requested


_PROC_PREFIX = re.compile(r"^\([\w-]+ pid=\d+\)\s?")


def _first_error(lines: list[str], context: int = 8) -> list[str]:
    """The end of the log's first traceback: where a multi-process engine failed first,
    which its last lines (the API server's own traceback) no longer show."""
    body = [_PROC_PREFIX.sub("", line) for line in lines]
    start = next((i for i, b in enumerate(body) if b.startswith("Traceback (most recent")),
                 None)
    if start is None:
        return []
    end = next((i for i in range(start + 1, len(body))
                if body[i] and not body[i][0].isspace()), len(body) - 1)
    return lines[max(start, end - context):end + 1]


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    tail = text[-lines:]
    first = _first_error(text)
    if first and first[-1] not in tail:
        return "\n".join(["first error:", *first, "...", "last lines:", *tail])
    return "\n".join(tail)


_PROGRESS = re.compile(r"(\d+)/(\d+) \[")


def _requests_done(client_log: Path) -> str:
    try:
        found = _PROGRESS.findall(client_log.read_text(errors="replace")[-4000:])
    except OSError:
        return "?"
    return f"{found[-1][0]}/{found[-1][1]}" if found else "0"


class Deployment:
    """The emulated engine and its load generator on one virtual clock."""

    def __init__(self, cores: int, trace: Path | None = None) -> None:
        """trace: write every process's GPU work and the clock's jumps there (Chrome trace)
        when the deployment closes."""
        self.trace = trace
        self.trace_parts = None if trace is None else trace.with_suffix(".parts")
        if self.trace_parts is not None:
            shutil.rmtree(self.trace_parts, ignore_errors=True)
            self.trace_parts.mkdir(parents=True)
        self.network = PrivateNetwork()
        self.network.enter()
        try:
            self.tk = Timekeeper(trace_dir=self.trace_parts, deadlock_timeout_s=120.0,
                                 cores=cores)
            self.tk.start()
        except BaseException:
            self.network.leave()
            raise
        self.tree = ProcessTree(self.tk)
        self.virtual_start = self.tk.virtual_ns / 1e9
        # (real, virtual) CLOCK_MONOTONIC seconds, sampled while waiting on a process: what
        # maps the virtual times a client records back to the real time they took
        self.clock: list[tuple[float, float]] = []

    def virtual_s(self) -> float:
        return self.tk.virtual_ns / 1e9 - self.virtual_start

    def progress(self, what: str, wall0: float) -> None:
        print(f"[revati bench] {what}: virtual {self.virtual_s():.1f} s, wall "
              f"{time.monotonic() - wall0:.1f} s", flush=True)

    def wait(self, pid: int, until, what: str, timeout_s: float, log: Path,
             on_poll: Callable[[], None] | None = None) -> None:
        """Wait for `until()` (or, with until=None, for pid to exit 0), failing when pid
        dies first, the run deadlocks or timeout_s of real time pass; on_poll() runs at
        every look (0.2 s of real time apart)."""
        wall0 = last = time.monotonic()
        while True:
            if on_poll is not None:
                on_poll()
            code = self.tree.exit_code(pid)
            if until is None and code == 0:
                return
            if code is not None:
                raise BenchError(f"{what} failed (exit {code}); from {log}:\n"
                                 f"{_tail(log)}")
            if until is not None and until():
                return
            if self.tk.deadlocked:
                threads = "\n  ".join(str(t) for t in self.tk.threads())
                raise BenchError(f"{what}: the emulated deployment deadlocked:\n  {threads}")
            now = time.monotonic()
            self.clock.append((now, self.tk.virtual_ns / 1e9))
            if now - wall0 > timeout_s:
                raise BenchError(f"{what}: not done after {timeout_s:.0f} s; see {log}")
            if now - last > 10:
                last = now
                done = "" if until else f", requests {_requests_done(log)}"
                self.progress(what + done, wall0)
            time.sleep(0.2)

    def close(self, server: int | None = None, grace_s: float = 30.0) -> None:
        """End the deployment: the server first, gently (SIGTERM and up to grace_s of real
        time, so that its processes exit normally and leave their predictor totals), then
        whatever is left."""
        self.tree.kill_all(first=server, grace_s=grace_s)
        self.tk.stop()
        self.network.leave()
        if self.trace is not None and self.trace_parts is not None:
            n = merge_trace(self.trace_parts, self.trace)
            shutil.rmtree(self.trace_parts, ignore_errors=True)
            print(f"[revati bench] {n} trace events in {self.trace}", flush=True)


class EmulatedServer:
    """An engine's server for a catalog model on emulated GPUs, ready to take requests; a
    context manager that ends the whole deployment on exit."""

    def __init__(self, opts: BenchOptions) -> None:
        self.python = find_python(opts.engine, opts.engine_python)
        self.engine = ENGINES[opts.engine]
        # the load generator is vLLM's client for every engine
        self.client_python = (self.python if opts.engine == vllm.NAME
                              else find_python(vllm.NAME))
        try:
            self.model = resolve_name(opts.model)
        except UnknownModelError as e:
            raise BenchError(str(e)) from e
        self.hardware = resolve_hardware(opts.hardware)
        spec = load_spec(self.hardware)
        self.gpu_node_cpu_ms, self.gpu_node_torch_ms = spec.host_cpu_ms, spec.host_torch_ms
        self.opts = opts
        self.port = server_port(opts.port)
        self.out = opts.out.resolve()
        self.out.mkdir(parents=True, exist_ok=True)
        self.folder = materialise(self.model, MODELS_DIR)
        try:
            self.device = emulated_device_env(self.hardware, opts.tp * opts.pp,
                                              self.out / "device")
        except ValueError as e:
            raise BenchError(str(e)) from e
        self.log = self.out / "engine.log"
        self.dep: Deployment | None = None
        self.pid: int | None = None
        self.num_gpu_blocks: int | None = None
        self.max_model_len: int | None = None

    def host_cpu(self, when: str) -> float:
        """This host's single-thread speed now (revati.hostspeed), printed beside the GPU
        node's: CPU work counts in virtual time at this host's speed."""
        ms = host_cpu_ms(seconds=1.0, warmup_s=0.5)
        ref = self.gpu_node_cpu_ms
        note = f"host CPU {ms:.1f} ms per repetition {when}"
        if ref:
            note += f" (the {self.hardware} node's host: {ref:.1f} ms)"
            if ms > 1.15 * ref:
                note += (f": this host runs {ms / ref:.2f}x slower now, so TTFT and CPU-bound "
                         f"steps read high")
        print(f"[revati bench] {note}", flush=True)
        return ms

    def cpu_dilation(self) -> dict[str, float | None]:
        """REVATI_CPU_DILATION for the engine (docs/timewarp.md, "The GPU node's host CPU"):
        the option's factor, or else the node's PyTorch dispatch time over this host's, timed
        now with the engine's interpreter; at least 1, since a slower host cannot be sped up."""
        ref = self.gpu_node_torch_ms
        if self.opts.cpu_dilation is not None or ref is None:
            factor = self.opts.cpu_dilation or 1.0
            return {"factor": factor, "host_torch_ms": None, "gpu_node_torch_ms": ref}
        try:
            ms = torch_ms(str(self.python))
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            raise BenchError(str(e)) from e
        factor = round(max(1.0, ref / ms), 3)
        note = (f"GPU-driving threads pay their CPU time x{factor:.2f}" if ref >= ms else
                f"this host is {ms / ref:.2f}x slower, so CPU-bound steps read long")
        print(f"[revati bench] PyTorch dispatch {ms:.1f} ms per repetition here, {ref:.1f} ms on "
              f"the {self.hardware} node's host: {note}", flush=True)
        return {"factor": factor, "host_torch_ms": ms, "gpu_node_torch_ms": ref}

    def __enter__(self) -> EmulatedServer:
        self.log.unlink(missing_ok=True)
        start_notices()
        self.host_cpu_ms_before = self.host_cpu("before the engine starts")
        self.dilation = self.cpu_dilation()
        wall0 = time.monotonic()
        self.cores = host_cores() if self.opts.cores is None else self.opts.cores
        self.dep = Deployment(self.cores,
                              self.out / "gpu_trace.json" if self.opts.gpu_trace else None)
        self.totals = self.out / "predictor_totals"
        shutil.rmtree(self.totals, ignore_errors=True)
        self.totals.mkdir()
        try:
            env = self.engine.serve_env(emulated_env(self.dep.tk.segment, self.opts.log_level,
                                                     self.device), self.python)
            env["REVATI_PREDICT_TOTALS"] = str(self.totals)
            env["REVATI_CPU_DILATION"] = f"{self.dilation['factor']:.3f}"
            env |= routing_env(load_model(self.model).config)
            self.pid = pid = self.dep.tree.spawn(
                self.engine.serve_command(self.python, self.folder.model_dir,
                                          self.folder.tokenizer_dir, self.port, self.opts.tp,
                                          self.opts.pp, self.opts.engine_args),
                env, self.log)
            name = self.engine.NAME
            self.dep.progress(f"starting {name} for {self.model} on "
                              f"{self.opts.tp * self.opts.pp}x {self.hardware} in "
                              f"{self.dep.network.where}", wall0)
            self.dep.wait(pid, lambda: self.engine.is_ready(self.port), f"{name} start-up",
                          self.opts.ready_timeout_s, self.log)
        except BaseException:
            self.dep.close()
            raise
        self.num_gpu_blocks = self.engine.num_gpu_blocks(self.port)
        self.max_model_len = max_model_len(self.port)
        self.dep.progress(f"engine ready ({self.num_gpu_blocks} KV-cache blocks)", wall0)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.dep is not None
        self.dep.close(self.pid)

    def predictor_totals(self) -> dict[str, int]:
        """Predicted GPU time (ns) by source over the engine processes, up to their last
        launch: model_ns, roofline_ns, fixed_ns; of them attention_by_batch_ns, the attention
        time predicted from the batches the engine's observer reported, unseen_kernel_ns, the
        time of kernels the models never saw (by name or skeleton), and launch_only_ns, that
        of attention, GEMM and fused-MoE kernels predicted without their shape."""
        return read_totals(self.totals)


    def run_client(self, cmd: list[str], log: Path, timeout_s: float,
                   env: dict[str, str] | None = None, log_level: str = "warn",
                   on_poll: Callable[[], None] | None = None) -> None:
        """Run a client of this server (a load generator) on the deployment's virtual clock
        until it exits 0; BenchError when it fails, deadlocks or outlives timeout_s."""
        assert self.dep is not None
        client = self.dep.tree.spawn(cmd, emulated_env(self.dep.tk.segment, log_level, {})
                                     | (env or {}), log)
        self.dep.wait(client, None, "load generator", timeout_s, log, on_poll)

    def run_load(self, opts: BenchOptions, out: Path) -> dict:
        """Run `vllm bench serve` against this server as opts says; write out/summary.json
        and out/requests.csv and return the summary."""
        assert self.dep is not None
        out = out.resolve()
        out.mkdir(parents=True, exist_ok=True)
        client_log = out / "client.log"
        client_log.unlink(missing_ok=True)
        (out / RAW_RESULT).unlink(missing_ok=True)
        check_numbers(opts)
        if self.max_model_len:
            check_requests(opts, self.max_model_len, "the engine's max_model_len")
        load = load_args(opts, out, self.max_model_len)
        wall0 = time.monotonic()
        # the predictor's counts when the client starts its measured requests (it prints
        # MEASURED_RUN after its warm-ups), to tell the load's kernels from the start-up's
        at_measured: dict[str, int] = {}
        log_at_measured = 0  # the engine log's length then

        def note_measured_start() -> None:
            nonlocal log_at_measured
            if not at_measured and MEASURED_RUN in client_log.read_text(errors="replace"):
                at_measured.update(self.predictor_totals())
                log_at_measured = self.log.stat().st_size

        self.run_client(vllm.bench_command(self.client_python, self.engine.BENCH_BACKEND,
                                           self.port, self.folder.model_dir,
                                           self.folder.tokenizer_dir, out, RAW_RESULT, load),
                        client_log, opts.ready_timeout_s, vllm.ENV, opts.log_level,
                        note_measured_start)
        end = self.predictor_totals()
        raw = json.loads((out / RAW_RESULT).read_text())
        summary = summarise(raw, time.monotonic() - wall0, self.num_gpu_blocks)
        after = self.host_cpu("after the load")
        summary["measured_wall_s"] = measured_wall_s(raw, self.dep.clock)
        summary["predictor_measured"] = predictor_summary(
            {k: end[k] - at_measured.get(k, 0) for k in end}) if at_measured else None
        summary["jit_during_measured"] = jit_compilations(
            self.engine.JIT_DURING_SERVING, self.log, log_at_measured) if at_measured else None
        contention = self.dep.tk.contention()
        summary["revati"] = {"engine": self.engine.NAME, "model": self.model,
                             "hardware": self.hardware, "tp": self.opts.tp, "pp": self.opts.pp,
                             "engine_args": self.opts.engine_args,
                             "engine_env": self.engine.ENV,
                             "cores": self.cores,
                             "network": self.dep.network.where,
                             "cpu_contention": vars(contention),
                             "virtual_clock": clock_rates(contention, self.dep.virtual_s()),
                             "cpu_dilation": self.dilation,
                             "host_cpu_ms": {"before": self.host_cpu_ms_before, "after": after,
                                             "gpu_node": self.gpu_node_cpu_ms}}
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
        write_requests_csv(raw, out / "requests.csv")
        return summary


def load_args(opts: BenchOptions, out: Path, max_len: int | None) -> dict[str, str | None]:
    """`vllm bench serve` arguments (name: value, None for a bare flag) for the workload;
    sharegpt and trace requests go to OUT/dataset.jsonl as vLLM's timed_trace dataset.
    ShareGPT draws only pairs that fit the engine's max_len."""
    common = {"num-prompts": str(opts.num_prompts), "seed": str(opts.seed),
              "num-warmups": str(opts.num_warmups)}
    if opts.max_concurrency:
        common["max-concurrency"] = str(opts.max_concurrency)
    arrivals = {"request-rate": str(opts.request_rate), "burstiness": str(opts.burstiness)}
    if opts.dataset == "random":
        return {"dataset-name": "random", "random-input-len": str(opts.input_len),
                "random-output-len": str(opts.output_len),
                "random-range-ratio": str(opts.range_ratio), **arrivals, **common}
    try:
        if opts.dataset == "sharegpt":
            requests = datasets.sharegpt(opts.num_prompts, opts.seed, max_len)
            timing = {"no-self-timed": None, **arrivals}
        else:   # a trace, which check_requests has read once already
            assert opts.trace is not None
            requests = datasets.load_trace(opts.trace)[:opts.num_prompts or None]
            common["num-prompts"] = str(len(requests))
            timing = {"self-timed": None}
        path = datasets.write_timed_trace(requests, out / "dataset.jsonl")
    except datasets.DatasetError as e:
        raise BenchError(str(e)) from e
    return {"dataset-name": "timed_trace", "dataset-path": str(path), **timing, **common}


def run_bench(opts: BenchOptions) -> dict:
    """Check the options, start the emulated engine, run the load against it, end
    everything."""
    check_options(opts, resolve_hardware(opts.hardware))
    with EmulatedServer(opts) as server:
        summary = server.run_load(opts, opts.out)
    # the engine processes leave their predictor totals as they exit
    summary.update(predictor_summary(server.predictor_totals()))
    (opts.out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def predictor_summary(totals: dict[str, int]) -> dict[str, float | None]:
    """The summary's predictor keys from the engine processes' totals: predictor_coverage,
    the share of predicted GPU time that came from measured models rather than the roofline;
    unseen_kernel_share, the share from kernels the models never saw; launch_only_share, the
    share of attention, GEMM and fused-MoE kernels predicted from their launch alone (their
    shape unknown: the least accurate models, docs/predictor.md); attention_by_batch_s, the
    attention time predicted from the batches the engine's observer reported."""
    known = totals.get("model_ns", 0) + totals.get("roofline_ns", 0)
    predicted = known + totals.get("fixed_ns", 0)
    return {"predictor_coverage": totals.get("model_ns", 0) / known if known else None,
            "attention_by_batch_s": totals.get("attention_by_batch_ns", 0) / 1e9,
            "unseen_kernel_share": (totals.get("unseen_kernel_ns", 0) / predicted
                                    if predicted else None),
            "launch_only_share": (totals.get("launch_only_ns", 0) / predicted
                                  if predicted else None)}


def measured_wall_s(raw: dict, clock: list[tuple[float, float]]) -> float | None:
    """Real seconds the measured requests took: from the first one's send to the end of the
    benchmark's `duration`, both in virtual time (the client's perf_counter), mapped to real
    time through the (real, virtual) clock samples, taken every 0.2 s of real time (so
    within about 0.4 s); None without start times or samples.
    `wall_s` also counts the client's start-up and its warm-up requests, which the real
    run's `duration` does not."""
    starts = raw.get("start_times") or []
    if not starts or len(clock) < 2 or raw.get("duration") is None:
        return None
    real, virtual = [r for r, _ in clock], [v for _, v in clock]

    def real_at(v: float) -> float:
        i = bisect.bisect_left(virtual, v)
        if i == 0:
            return real[0]
        if i == len(virtual):
            return real[-1]
        v0, v1, r0, r1 = virtual[i - 1], virtual[i], real[i - 1], real[i]   # v0 < v <= v1
        return r0 + (r1 - r0) * (v - v0) / (v1 - v0)

    first = min(starts)
    return round(real_at(first + raw["duration"]) - real_at(first), 3)


def jit_compilations(pattern: re.Pattern | None, log: Path, offset: int) -> list[str] | None:
    """The kernels the engine's log says were compiled while it served, after `offset`
    bytes of it (the measured requests' start): CPU time a warm server would not spend
    there (issue #24). None for an engine that does not log them."""
    if pattern is None:
        return None
    with log.open("rb") as f:
        f.seek(offset)
        return pattern.findall(f.read().decode(errors="replace"))


def clock_rates(c: Contention, virtual_s: float) -> dict[str, float | None]:
    """How fast virtual time ran while the deployment's CPU work did (its rate against real
    time: lowest, mean, highest), and the share of the deployment's virtual time that was
    CPU work's rather than jumps over GPU work and waits (issue #24: a result that leaned on
    the contention correction says so). None without the correction (--cores off)."""
    if not c.cpu_real_s:
        return {"rate_min": None, "rate_mean": None, "rate_max": None, "cpu_bound_share": None}
    share = min(1.0, c.cpu_virtual_s / virtual_s) if virtual_s else None
    return {"rate_min": round(c.rate_min, 4),
            "rate_mean": round(c.cpu_virtual_s / c.cpu_real_s, 4),
            "rate_max": round(c.rate_max, 4),
            "cpu_bound_share": None if share is None else round(share, 4)}


def summarise(raw: dict, load_wall_s: float, blocks: int | None) -> dict:
    summary = {k: v for k, v in raw.items() if k not in DETAIL_KEYS}
    summary["wall_s"] = load_wall_s
    summary["num_gpu_blocks"] = blocks
    # known once the engine has exited (run_bench fills it in); a load run against a
    # server that keeps running reports it as unknown rather than guessed
    summary["predictor_coverage"] = None
    summary["attention_by_batch_s"] = None
    summary["unseen_kernel_share"] = None
    summary["launch_only_share"] = None
    # why requests failed, the most frequent first: the client keeps one error per request
    reasons = Counter(e.strip().splitlines()[-1][:300] for e in raw.get("errors") or [] if e)
    summary["failure_reasons"] = dict(reasons.most_common(5))
    return summary


def write_requests_csv(raw: dict, path: Path) -> None:
    starts = raw.get("start_times") or []
    t0 = min(starts) if starts else 0.0
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["request", "send_time_s", "input_tokens", "output_tokens", "ttft_ms",
                    "tpot_ms", "e2e_ms", "itl_ms", "error"])
        for i, (inp, outp, ttft, itls) in enumerate(zip(raw["input_lens"], raw["output_lens"],
                                                        raw["ttfts"], raw["itls"], strict=True)):
            e2e = ttft + sum(itls)
            tpot = (e2e - ttft) / (outp - 1) if outp > 1 else 0.0
            w.writerow([i, f"{starts[i] - t0:.6f}" if starts else "", inp, outp,
                        f"{ttft * 1e3:.3f}", f"{tpot * 1e3:.3f}", f"{e2e * 1e3:.3f}",
                        json.dumps([round(x * 1e3, 3) for x in itls]),
                        (raw.get("errors") or [""] * len(raw["ttfts"]))[i]])
