"""One trial: the emulated benchmark (`revati bench`'s server and load) for a configuration.

This is the only place the tuner runs a benchmark. A trial writes OUT/summary.json (the keys
`vllm bench serve --save-result` writes, plus wall_s, num_gpu_blocks and the predictor's
figures over the measured requests), OUT/requests.csv (one row per request), OUT/bench.log
(the benchmark's progress, kept as the trial's log) and OUT/command.txt, the `revati bench`
command that runs the same trial on a fresh engine of its own.

Trials whose engine is the same (engine, model, hardware, layout, engine flags: everything
but the load, bench.options.LOAD) share one started engine (SharedEngine): a sweep over
request rates, workloads or seeds starts it once, and each trial after the first finds the
prefix cache emptied and the warm state (compiled kernels, CUDA graphs) kept, as on a real
server that a benchmark operator reuses. `trial.share_engine=false` starts one per trial.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna

from revati.bench.checks import check_options
from revati.bench.errors import BenchError
from revati.bench.options import LOAD, BenchOptions, command_line
from revati.bench.server import EmulatedServer, resolve_hardware
from revati.tune.engine_flags import engine_flags, engine_release
from revati.tune.pruning import metrics_args


class TrialError(RuntimeError):
    """The benchmark did not produce a result; the message is the recorded reason."""


# the options a trial sets explicitly in its command line, beside those off their default
_EXPLICIT = ("engine", "model", "hardware", "tp", "pp", "dataset", "num_prompts",
             "request_rate", "burstiness", "num_warmups", "seed", "out")


def bench_options(cfg: Any, out_dir: Path) -> tuple[BenchOptions, tuple[str, ...]]:
    """The trial's `revati bench` options, and the names its command line states."""
    w, par = cfg.workload, cfg.parallelism
    opts = BenchOptions(
        engine=engine_release(cfg), model=cfg.model.name, hardware=cfg.hardware_key,
        tp=par.tensor_parallel_size, pp=par.pipeline_parallel_size, dataset=w.dataset,
        num_prompts=w.num_prompts, request_rate=w.request_rate, burstiness=w.burstiness,
        num_warmups=w.get("num_warmups", 0), seed=cfg.seed, out=out_dir,
        ready_timeout_s=float(cfg.trial.timeout_s),
        engine_args=engine_flags(cfg) + metrics_args(cfg))
    # the dataset's own options
    own: tuple[str, ...] = ()
    if w.dataset == "random":
        opts.input_len, opts.output_len = w.input_len, w.output_len
        opts.range_ratio = w.get("range_ratio", 0.0)
        own = ("input_len", "output_len", "range_ratio")
    elif w.dataset == "trace":
        opts.trace, own = Path(str(w.trace)), ("trace",)
    return opts, (*_EXPLICIT, *own)


def bench_command(cfg: Any, out_dir: Path) -> list[str]:
    """The `revati bench` command that runs the trial alone, on a fresh engine."""
    opts, explicit = bench_options(cfg, out_dir)
    return [sys.executable, "-m", "revati.cli.main", "bench", *command_line(opts, explicit)]


def engine_key(opts: BenchOptions) -> BenchOptions:
    """What makes two trials' engines the same: every option but the load's."""
    return dataclasses.replace(opts, **{name: None for name in LOAD})


class SharedEngine:
    """The engine the last trial ran on, kept for the next trial whose engine_key matches;
    a context manager that ends it on exit (and the sweep on Ctrl-C or SIGTERM with it)."""

    def __init__(self, share: bool = True) -> None:
        self.share = share
        self.key: BenchOptions | None = None
        self.server: EmulatedServer | None = None
        self.started = 0  # engines started so far

    def serve(self, opts: BenchOptions) -> tuple[EmulatedServer, bool]:
        """A started engine for opts, and whether it served an earlier trial."""
        key = engine_key(opts)
        if self.server is not None and self.share and key == self.key:
            return self.server, True
        self.close()
        check_options(opts, resolve_hardware(opts.hardware))
        server = EmulatedServer(opts)
        server.__enter__()
        self.server, self.key = server, key
        self.started += 1
        return server, False

    def close(self) -> None:
        if self.server is not None:
            server, self.server, self.key = self.server, None, None
            server.__exit__(None, None, None)

    def __enter__(self) -> SharedEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_trial(cfg: Any, engines: SharedEngine,
              watch: Callable[[EmulatedServer], Callable[[], None]] | None = None
              ) -> dict[str, Any]:
    """Run the benchmark into cfg.trial.out_dir on engines' engine and return its summary.
    watch(server), when given, makes the load's during_measured (EmulatedServer.run_load):
    the pruner's reports, whose optuna.TrialPruned stops the load and leaves the engine to
    the next trial.

    Raises TrialError with a one-line reason when the engine does not start, the load fails,
    or a request fails."""
    out_dir = Path(cfg.trial.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    opts, _ = bench_options(cfg, out_dir)
    (out_dir / "command.txt").write_text(" ".join(bench_command(cfg, out_dir)) + "\n")
    with (out_dir / "bench.log").open("w") as log, contextlib.redirect_stdout(log):
        try:
            server, reused = engines.serve(opts)
            if reused:
                print(f"[revati-tune] the engine of {server.out} (started for an earlier "
                      f"trial, prefix cache emptied): engine log {server.log}", flush=True)
            summary = server.run_load(opts, out_dir, watch(server) if watch else None)
        except optuna.TrialPruned:
            try:  # the stopped client's requests end; an engine that keeps them ends too
                server.reset_cache()
            except BenchError:
                engines.close()
            raise
        except BenchError as e:
            print(f"revati bench: {e}", flush=True)
            # an engine that failed a load may be in any state: the next trial starts anew
            engines.close()
            raise TrialError(" ".join(str(e).split())[:500]) from None
        except BaseException:
            engines.close()
            raise
    summary["engine_shared"] = reused
    # the predictor's figures over the measured requests: the engine's start-up is not the
    # trial's, and a shared engine's belongs to an earlier one
    summary.update(summary.get("predictor_measured") or {})
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    if summary.get("failed") or not summary["completed"]:
        why = "; ".join(f"{n} x {e}" for e, n in summary["failure_reasons"].items())
        failed = summary.get("failed", 0)
        raise TrialError(f"{failed} of {summary['completed'] + failed} requests failed "
                         f"({why or 'no error given'}); see {server.log}")
    return summary
