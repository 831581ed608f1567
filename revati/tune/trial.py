"""One trial: run the emulated benchmark (`revati bench`) for a configuration.

This is the only place the tuner starts a benchmark. The benchmark writes OUT/summary.json
(the keys `vllm bench serve --save-result` writes, plus wall_s, num_gpu_blocks and
predictor_coverage) and OUT/requests.csv (one row per request); its output goes to
OUT/bench.log, which the tuner keeps as the trial's engine log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from revati.bench.options import BenchOptions, command_line
from revati.tune.engine_flags import engine_flags


class TrialError(RuntimeError):
    """The benchmark did not produce a result; the message is the recorded reason."""


def bench_command(cfg: Any, out_dir: Path) -> list[str]:
    w, par = cfg.workload, cfg.parallelism
    opts = BenchOptions(
        engine=cfg.engine.name, model=cfg.model.name, hardware=cfg.hardware_key,
        tp=par.tensor_parallel_size, pp=par.pipeline_parallel_size, dataset=w.dataset,
        num_prompts=w.num_prompts, request_rate=w.request_rate, burstiness=w.burstiness,
        num_warmups=w.get("num_warmups", 0), seed=cfg.seed, out=out_dir,
        engine_args=engine_flags(cfg))
    # the dataset's own options
    own: tuple[str, ...] = ()
    if w.dataset == "random":
        opts.input_len, opts.output_len = w.input_len, w.output_len
        opts.range_ratio = w.get("range_ratio", 0.0)
        own = ("input_len", "output_len", "range_ratio")
    elif w.dataset == "trace":
        opts.trace, own = Path(str(w.trace)), ("trace",)
    explicit = ("engine", "model", "hardware", "tp", "pp", "dataset", *own, "num_prompts",
                "request_rate", "burstiness", "num_warmups", "seed", "out")
    return [sys.executable, "-m", "revati.cli.main", "bench", *command_line(opts, explicit)]


def _end_session(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _tail(log: Path, lines: int = 1) -> str:
    text = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return " | ".join(text[-lines:]) if text else "(no output)"


def run_trial(cfg: Any) -> dict[str, Any]:
    """Run the benchmark into cfg.trial.out_dir and return its summary.json as a dict.

    Raises TrialError with a one-line reason when the benchmark fails, times out or
    writes no summary."""
    out_dir = Path(cfg.trial.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    log = out_dir / "bench.log"
    cmd = bench_command(cfg, out_dir)
    (out_dir / "command.txt").write_text(" ".join(cmd) + "\n")
    with log.open("w") as fh:
        # A session of its own, so a timeout ends the engine processes bench started too.
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            returncode = proc.wait(timeout=cfg.trial.timeout_s)
        except subprocess.TimeoutExpired:
            _end_session(proc)
            raise TrialError(f"bench timed out after {cfg.trial.timeout_s} s") from None
        except BaseException:
            # Ctrl-C or SIGTERM of the sweep: the benchmark's engines end with it
            _end_session(proc)
            raise
    if returncode != 0:
        raise TrialError(f"bench exited with status {returncode}: {_tail(log)}")
    summary_path = out_dir / "summary.json"
    if not summary_path.is_file():
        raise TrialError(f"bench exited 0 but wrote no {summary_path.name}: {_tail(log)}")
    try:
        summary = json.loads(summary_path.read_text())
    except json.JSONDecodeError as exc:
        raise TrialError(f"bench wrote an unreadable {summary_path.name}: {exc}") from None
    if not isinstance(summary, dict):
        raise TrialError(f"bench wrote a {type(summary).__name__}, not an object, "
                         f"to {summary_path.name}")
    return summary
