"""How long a trial takes in real time on this host, estimated before it runs.

The clock rate corrects virtual-time results for this host's cores (contention,
docs/timewarp.md; how well: docs/limits.md), and the wall time depends on them: every
emulated GPU is a worker process running the engine's real Python, so a layout with more GPUs
than this host has cores runs slower in real time. The sweep prints each trial's estimate
and the total before it starts, and `trial.max_wall_min` skips layouts whose estimate exceeds
it.

The estimate is start-up plus load (once per trial.repeats), each stretched by the processes
that compete for the cores, from runs on the 2-core development VM: vLLM's start-up took
~60 s for Llama-3.1-8B (32 layers) at TP 1 and ~150 s for a 70B shape (80 layers) at TP 2,
which gives 33 s plus 0.83 s a layer with a core per process; at TP 1 the measured requests
ran at 0.7-1.0x their virtual duration (docs/limits.md). A planning figure, good to a factor
of about two.
"""

from __future__ import annotations

import math
from typing import Any

START_BASE_S = 33.0      # engine start-up with a core to itself, beyond the layers' share
START_PER_LAYER_S = 0.83  # torch.compile and CUDA-graph capture grow with the layers
CLIENT_S = 10.0          # the load generator's start-up and warm-up requests
# a load sent all at once has no rate to tell its virtual length: this many seconds of
# decoding per output token of the longest request, the decode step of a busy engine
STEP_S = 0.03


def load_virtual_s(workload: Any) -> float:
    """The load's length in virtual time: its requests at its rate (or, sent at once, the
    decode steps of one request after another's turn), plus its warm-ups."""
    n = workload.num_prompts or 0
    rate = float(workload.get("request_rate", math.inf))
    output = workload.get("output_len") or 256
    sending = n / rate if math.isfinite(rate) and rate > 0 else 0.0
    return sending + output * STEP_S + workload.get("num_warmups", 0) * output * STEP_S / 4


def estimate_wall_s(cfg: Any, started: bool = False) -> float:
    """Estimated real seconds of one trial of cfg on parallelism.host_cores cores; started:
    on an engine an earlier trial started (revati/tune/trial.py, SharedEngine)."""
    par = cfg.parallelism
    gpus = par.tensor_parallel_size * par.pipeline_parallel_size
    # one worker process per GPU and one more (the engine core or the API server) busy at
    # once: the start-ups above are 1 (TP 1) and 1.5 (TP 2) such stretches on 2 cores
    stretch = max(1.0, (gpus + 1) / max(1, par.host_cores))
    layers = cfg.model.config.num_hidden_layers
    start = 0.0 if started else (START_BASE_S + START_PER_LAYER_S * layers) * stretch
    load = CLIENT_S + load_virtual_s(cfg.workload) * stretch
    return start + load * cfg.trial.repeats


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"
