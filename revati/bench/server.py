"""The engine's server on emulated GPUs (EmulatedServer) and `revati bench`'s run of a load
against it (run_bench)."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from revati.bench.checks import check_numbers, check_options, check_requests
from revati.bench.deployment import Deployment
from revati.bench.errors import BenchError
from revati.bench.load import load_args
from revati.bench.options import BenchOptions
from revati.bench.results import (
    RAW_RESULT,
    clock_rates,
    jit_compilations,
    measured_wall_s,
    predictor_summary,
    summarise,
    write_requests_csv,
)
from revati.bench.window import MeasuredStart
from revati.cache import MODELS_DIR
from revati.device.env import emulated_device_env
from revati.device.spec import UnknownHardwareError, load_spec
from revati.device.spec import resolve_hardware as spec_name
from revati.engines import ENGINES, settings, versions, vllm
from revati.engines.common import complete_together, http_json, max_model_len
from revati.hostspeed import measure, torch_ms
from revati.models.catalog import UnknownModelError, load_model, resolve_name
from revati.models.folder import materialise
from revati.models.sizing import routing_env
from revati.ports import free_port, is_free
from revati.predict.totals import read_totals
from revati.timewarp.runner import emulated_env, start_notices
from revati.timewarp.timekeeper import host_cores

REPO = Path(__file__).resolve().parents[2]


def resolve_hardware(name: str) -> str:
    try:
        return spec_name(name)
    except UnknownHardwareError as e:
        raise BenchError(str(e)) from e


def find_python(spec: str, given: Path | None = None) -> Path:
    """The interpreter that has the engine release `spec` (NAME or NAME==VERSION): `given`
    (--engine-python); for the pinned release $REVATI_<ENGINE>_PYTHON or the .venv-<engine>
    that scripts/install.sh makes (vLLM's); else the release's venv, made on first use
    (revati/engines/versions.py)."""
    try:
        engine, version = versions.check(spec)
        if given:
            if not Path(given).exists():
                raise BenchError(f"--engine-python {given}: no such file")
            python = Path(given)
        else:
            local = ([os.environ.get(f"REVATI_{engine.upper()}_PYTHON"),
                      REPO / f".venv-{engine}" / "bin" / "python"]
                     if versions.is_pinned(engine, version) else [])
            python = (next((Path(c) for c in local if c and Path(c).exists()), None)
                      or versions.engine_python(engine, version, log=_progress))
    except versions.EngineVersionError as e:
        raise BenchError(str(e)) from None
    except subprocess.CalledProcessError as e:
        raise BenchError(f"could not make the venv of {spec} ({e.cmd[-1]} failed): see "
                         f"{versions.venv_root()}/*.log") from None
    if not ENGINES[engine].has_engine(python):
        raise BenchError(f"{engine} is not installed for {python}: pass an interpreter that "
                         "has it with --engine-python")
    return python


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def server_port(requested: int | None) -> int:
    """The API server's port: the one asked for, which must be free, or one of ports.free_port."""
    if requested is None:
        return free_port()
    if not is_free(requested):
        raise BenchError(f"port {requested} is in use")
    return requested


class EmulatedServer:
    """An engine's server for a catalog model on emulated GPUs, ready to take requests; a
    context manager that ends the whole deployment on exit."""

    def __init__(self, opts: BenchOptions) -> None:
        self.python = find_python(opts.engine, opts.engine_python)
        name, version = versions.split(opts.engine)
        self.engine = ENGINES[name]
        self.release = f"{name}=={version or versions.pinned_version(name)}"
        # the load generator is the pinned vLLM's client for every engine and release, so
        # that a comparison of releases compares the servers alone
        self.client_python = (self.python if opts.engine == vllm.NAME
                              else find_python(vllm.NAME))
        try:
            self.model = resolve_name(opts.model)
        except UnknownModelError as e:
            raise BenchError(str(e)) from e
        self.hardware = resolve_hardware(opts.hardware)
        spec = load_spec(self.hardware)
        self.gpu_node_cpu_ms, self.gpu_node_torch_ms = spec.host_cpu_ms, spec.host_torch_ms
        # where the predicted collectives come from (docs/predictor.md, "Collectives")
        self.collectives = ("none" if not spec.collectives else
                            "measured" if spec.collectives_measured else "published")
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
        # which GPU's duration models predict the kernels (None: the roofline alone), and
        # whether they are another GPU's, carried over (docs/predictor.md)
        models = self.device.get("REVATI_PREDICT_MODELS")
        self.predictor_models = {
            "trained_on": Path(models).parent.name if models else None,
            "carried_over": self.device.get("REVATI_PREDICT_TRANSFER") == "1"}
        self.log = self.out / "engine.log"
        self.dep: Deployment | None = None
        self.pid: int | None = None
        self.num_gpu_blocks: int | None = None
        self.max_model_len: int | None = None
        self.cache_used = False  # a load filled the prefix cache since it was last emptied

    def host_cpu(self, when: str) -> tuple[float, float]:
        """This host's single-thread speed now (revati.hostspeed, in the thread's CPU time:
        a core's speed, whatever else runs), printed beside the GPU node's: with the
        clock-rate correction on (cores), CPU work counts at the node's speed; without it,
        at this host's. The median repetition's ms, and the fastest (for cpu_dilation)."""
        times = measure(seconds=1.0, warmup_s=0.5, clock=time.thread_time)
        ms = round(statistics.median(times) * 1000, 2)
        ref = self.gpu_node_cpu_ms
        note = f"host CPU {ms:.1f} ms per repetition {when}"
        if ref:
            note += f" (the {self.hardware} node's host: {ref:.1f} ms)"
            if not self.cores and ms > 1.15 * ref:
                note += (f": this host runs {ms / ref:.2f}x slower now and --cores is off, so "
                         f"TTFT and CPU-bound steps read high")
        print(f"[revati bench] {note}", flush=True)
        return ms, min(times) * 1000

    def cpu_dilation(self) -> dict[str, float | None]:
        """REVATI_CPU_DILATION for the engine (docs/timewarp.md, "GPU-driving threads"): the
        option's factor, or else how the node's PyTorch dispatch compares with the clock
        rate's speed for the threads that drive a GPU. The rate counts every thread's CPU work
        at the node's speed for the Python workload (the node's time over this host's, s);
        dispatch runs t times as long there (timed now with the engine's interpreter), so those
        threads count t / s times what the rate gives them. Below 1 the clock slows while
        they alone work, which needs the rate (--cores); without it the factor is at least 1.
        Both from this host's fastest repetitions, as the node's figures are its quiet speed
        and the rate's probe takes its fastest: a median taken while the host was briefly
        busy (23.3 ms where 12.8-14.0 was usual) made the factor 2.16 and TTFT +152 %."""
        ref = self.gpu_node_torch_ms
        if self.opts.cpu_dilation is not None or ref is None:
            factor = self.opts.cpu_dilation or 1.0
            return {"factor": factor, "host_torch_ms": None, "gpu_node_torch_ms": ref,
                    "host_cpu_ms": None}
        try:
            ms = torch_ms(str(self.python))
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            raise BenchError(str(e)) from e
        # timed again after the torch workload, the faster kept: one slow second before the
        # engine started (22.4 ms against 13.7 a minute later) read a factor of 2.11
        again = min(measure(seconds=0.5, warmup_s=0.2, clock=time.thread_time)) * 1000
        python_ms = round(min(self.host_cpu_fastest_ms, again), 2)
        speed = self.gpu_node_cpu_ms / python_ms if self.cores and self.gpu_node_cpu_ms else 1.0
        factor = round(min(100.0, max(0.1 if self.cores else 1.0, ref / ms / speed)), 3)
        print(f"[revati bench] PyTorch dispatch {ms:.1f} ms per repetition here (the fastest), "
              f"{ref:.1f} ms on the {self.hardware} node's host: GPU-driving threads count "
              f"their CPU time x{factor:.2f} of the clock rate's", flush=True)
        return {"factor": factor, "host_torch_ms": ms, "gpu_node_torch_ms": ref,
                "host_cpu_ms": python_ms}

    def __enter__(self) -> EmulatedServer:
        self.log.unlink(missing_ok=True)
        start_notices()
        self.cores = host_cores() if self.opts.cores is None else self.opts.cores
        self.host_cpu_ms_before, self.host_cpu_fastest_ms = self.host_cpu(
            "before the engine starts")
        self.dilation = self.cpu_dilation()
        wall0 = time.monotonic()
        self.dep = Deployment(self.cores,
                              self.out / "gpu_trace.json" if self.opts.gpu_trace else None,
                              self.gpu_node_cpu_ms)
        self.totals = self.out / "predictor_totals"
        shutil.rmtree(self.totals, ignore_errors=True)
        self.totals.mkdir()
        try:
            env = self.engine.serve_env(emulated_env(self.dep.tk.segment, self.opts.log_level,
                                                     self.device), self.python)
            env["REVATI_PREDICT_TOTALS"] = str(self.totals)
            env["REVATI_CPU_DILATION"] = f"{self.dilation['factor']:.3f}"
            env |= routing_env(load_model(self.model).config)
            self.engine_env = settings(self.engine, env)
            self.pid = pid = self.dep.spawn(
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
        try:
            self.warm_batches(wall0)
        except BaseException:
            self.dep.close(self.pid)
            raise
        return self

    def warm_batches(self, wall0: float) -> None:
        """Batches of the engine's WARM_BATCHES sizes, one after the other, before any load."""
        cards = http_json(self.port, "/v1/models").get("data") or []
        for n in self.engine.WARM_BATCHES:
            if not cards or not complete_together(self.port, cards[0]["id"], n):
                raise BenchError(f"{self.engine.NAME} did not serve a warm-up batch of {n} "
                                 f"requests; see {self.log}")
            self.cache_used = True
        if self.engine.WARM_BATCHES:
            self.dep.progress(f"warm-up batches of {self.engine.WARM_BATCHES} requests", wall0)

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
        # unbuffered: its progress lines (MEASURED_RUN among them) reach the log when it
        # prints them, not when a buffer fills, or when it exits
        client = self.dep.spawn(cmd, emulated_env(self.dep.tk.segment, log_level, {})
                                | (env or {}) | {"PYTHONUNBUFFERED": "1"}, log)
        try:
            self.dep.wait(client, None, "load generator", timeout_s, log, on_poll)
        except BaseException:
            # stopped by on_poll (a trial pruned early) or failed: the server may serve
            # another load, the client's requests end with its connections
            self.dep.tree.kill(client)
            raise

    def reset_cache(self, attempts: int = 5) -> None:
        """Empty the engine's prefix cache before a load that follows another, as a
        benchmark operator does: the same seed sends the same prompts, which would find
        the last load's KV blocks cached. The engine refuses while requests still finish
        (a client that ended on a timeout leaves some), so it is asked again."""
        for attempt in range(attempts):
            if self.engine.reset_cache(self.port):
                self.cache_used = False
                return
            time.sleep(1 + attempt)
        raise BenchError(f"{self.engine.NAME} did not empty its prefix cache after "
                         f"{attempts} requests; see {self.log}")

    def run_load(self, opts: BenchOptions, out: Path,
                 during_measured: Callable[[], None] | None = None) -> dict:
        """Run `vllm bench serve` against this server as opts says; write out/summary.json
        and out/requests.csv and return the summary. during_measured() runs at every look
        at the client (0.2 s of real time apart) once its measured requests have begun; an
        exception it raises stops the load and is raised."""
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
        if self.cache_used:
            self.reset_cache()
        self.cache_used = True
        wall0 = time.monotonic()
        start = MeasuredStart(self.predictor_totals, self.log, client_log)

        def note_measured_start() -> None:
            if start.look() and during_measured is not None:
                during_measured()

        self.run_client(vllm.bench_command(self.client_python, self.engine.BENCH_BACKEND,
                                           self.port, self.folder.model_dir,
                                           self.folder.tokenizer_dir, out, RAW_RESULT, load),
                        client_log, opts.ready_timeout_s, vllm.ENV, opts.log_level,
                        note_measured_start)
        end = self.predictor_totals()
        raw = json.loads((out / RAW_RESULT).read_text())
        summary = summarise(raw, time.monotonic() - wall0, self.num_gpu_blocks)
        after, _ = self.host_cpu("after the load")
        summary["measured_wall_s"] = measured_wall_s(raw, self.dep.clock)
        summary["predictor_measured"] = predictor_summary(
            {k: end[k] - start.totals.get(k, 0) for k in end}) if start.totals is not None else None
        summary["jit_during_measured"] = jit_compilations(
            self.engine.JIT_DURING_SERVING, self.log,
            start.engine_log_size) if start.totals is not None else None
        contention = self.dep.tk.contention()
        summary["revati"] = {"engine": self.engine.NAME, "release": self.release,
                             "model": self.model,
                             "hardware": self.hardware, "tp": self.opts.tp, "pp": self.opts.pp,
                             "engine_args": self.opts.engine_args,
                             "engine_env": self.engine_env,
                             "cores": self.dep.tk.cores,  # as applied (set_cores)
                             "nice": self.dep.tk.nice,
                             "network": self.dep.network.where,
                             "cpu_contention": vars(contention),
                             "virtual_clock": clock_rates(contention, self.dep.virtual_s()),
                             "cpu_dilation": self.dilation,
                             "collective_table": self.collectives,
                             "predictor_models": self.predictor_models,
                             "host_cpu_ms": {"before": self.host_cpu_ms_before, "after": after,
                                             "gpu_node": self.gpu_node_cpu_ms}}
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
        write_requests_csv(raw, out / "requests.csv")
        return summary


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
