"""Feasibility checks run on a configuration BEFORE its benchmark is launched.

Each check mirrors a rule the engine enforces at start-up (or a budget the operator sets),
so an infeasible configuration costs no emulation time: the tuner records it as a pruned
trial with the reason instead. A check returns None when the configuration passes, else a
one-line reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from revati.models.layout import context_problem, memory_problem, pp_problem, tp_problem
from revati.models.sizing import engine_dtypes
from revati.tune.errors import ConfigError
from revati.tune.walltime import estimate_wall_s, minutes


def _tp(cfg: Any) -> int:
    return cfg.parallelism.tensor_parallel_size


def _pp(cfg: Any) -> int:
    return cfg.parallelism.pipeline_parallel_size


def gpu_budget(cfg: Any) -> str | None:
    gpus = _tp(cfg) * _pp(cfg)
    if gpus > cfg.parallelism.max_gpus:
        return (f"tensor_parallel_size={_tp(cfg)} x pipeline_parallel_size={_pp(cfg)} = {gpus} "
                f"GPUs exceeds the budget max_gpus={cfg.parallelism.max_gpus}")
    return None


def wall_time(cfg: Any) -> str | None:
    # Opt-in: a layout is never ruled out for this host's cores (the clock rate corrects its
    # virtual time for the cores this host lacks; docs/limits.md says how well), only for the
    # real time it would take, when the sweep sets a limit (revati/tune/walltime.py).
    limit = cfg.trial.get("max_wall_min")
    if limit is None:
        return None
    est = estimate_wall_s(cfg)
    if est <= limit * 60:
        return None
    return (f"estimated wall time {minutes(est)} ({_tp(cfg) * _pp(cfg)} emulated GPUs on "
            f"parallelism.host_cores={cfg.parallelism.host_cores}) exceeds "
            f"trial.max_wall_min={limit}")


def tp_divides_heads(cfg: Any) -> str | None:
    mc = cfg.model.config
    return tp_problem(cfg.model.name, _tp(cfg), mc.num_attention_heads, mc.num_key_value_heads)


def pp_divides_layers(cfg: Any) -> str | None:
    return pp_problem(cfg.model.name, _pp(cfg), cfg.model.config.num_hidden_layers)


def fits_in_memory(cfg: Any) -> str | None:
    # vLLM budgets gpu_memory_utilization x total memory for weights, activations, the CUDA
    # context and the KV cache, and refuses to start unless the KV cache holds at least
    # one max_model_len sequence.
    w_dtype, kv_dtype = engine_dtypes(cfg.engine.dtype, cfg.engine.kv_cache_dtype,
                                      cfg.model.config.torch_dtype)
    hw, util = cfg.hardware, cfg.engine.gpu_memory_utilization
    return memory_problem(cfg.model.name, cfg.model.config, _tp(cfg), _pp(cfg),
                          weight_dtype=w_dtype, kv_dtype=kv_dtype,
                          context_tokens=cfg.engine.max_model_len,
                          usable_bytes=hw.memory_bytes * util - hw.context_reserved_bytes,
                          total_bytes=hw.memory_bytes,
                          setting=f"gpu_memory_utilization={util}")


def batch_token_budget(cfg: Any) -> str | None:
    sched = cfg.scheduler
    tokens, seqs = sched.max_num_batched_tokens, sched.max_num_seqs
    if tokens is None:
        return None
    if seqs is not None and tokens < seqs:
        return f"max_num_batched_tokens={tokens} is below max_num_seqs={seqs}"
    # Without chunked prefill a whole prompt must fit in one step's token budget.
    if sched.enable_chunked_prefill is False and tokens < cfg.engine.max_model_len:
        return (f"max_num_batched_tokens={tokens} is below max_model_len="
                f"{cfg.engine.max_model_len} with chunked prefill off")
    return None


def context_fits(cfg: Any) -> str | None:
    # vLLM refuses a max_model_len beyond the model's position embeddings, and rejects
    # (fails) every request whose prompt plus output exceeds max_model_len.
    max_len, positions = cfg.engine.max_model_len, cfg.model.config.max_position_embeddings
    if max_len > positions:
        return (f"max_model_len={max_len} exceeds max_position_embeddings={positions} "
                f"of {cfg.model.name}")
    w = cfg.workload
    # ShareGPT draws only requests that fit; a trace's longest request is its own business
    if w.dataset == "random":
        return context_problem(w.input_len, w.output_len, max_len, "max_model_len")
    return None


@dataclass(frozen=True)
class Constraint:
    check: Callable[[Any], str | None]
    reads: tuple[str, ...]  # config keys (or key prefixes) the check depends on


_PAR = ("parallelism.tensor_parallel_size", "parallelism.pipeline_parallel_size")
CONSTRAINTS = {
    "gpu_budget": Constraint(gpu_budget, (*_PAR, "parallelism.max_gpus")),
    "wall_time": Constraint(wall_time, (*_PAR, "parallelism.host_cores", "trial.max_wall_min",
                                        "trial.repeats", "workload", "model")),
    "tp_divides_heads": Constraint(tp_divides_heads, (_PAR[0], "model")),
    "pp_divides_layers": Constraint(pp_divides_layers, (_PAR[1], "model")),
    "fits_in_memory": Constraint(fits_in_memory, (*_PAR, "model", "hardware", "engine")),
    "batch_token_budget": Constraint(batch_token_budget, ("scheduler", "engine.max_model_len")),
    "context_fits": Constraint(context_fits, ("engine.max_model_len", "model", "workload")),
}


def _get(names: tuple[str, ...]) -> list[Constraint]:
    unknown = [n for n in names if n not in CONSTRAINTS]
    if unknown:
        raise ConfigError(f"unknown constraint '{unknown[0]}' (known: {', '.join(CONSTRAINTS)})")
    return [CONSTRAINTS[n] for n in names]


def first_violation(cfg: Any, names: tuple[str, ...]) -> str | None:
    """The reason the first failing constraint gives, or None when all pass."""
    for constraint in _get(names):
        reason = constraint.check(cfg)
        if reason:
            return reason
    return None


def check_fixed(cfg: Any, names: tuple[str, ...], swept: set[str]) -> None:
    """Raise ConfigError when a constraint fails on values the sweep never changes: then
    every trial would be infeasible, which is an input error, not a search result."""

    def touches(key: str, read: str) -> bool:
        return key == read or key.startswith(read + ".") or read.startswith(key + ".")

    for constraint in _get(names):
        if any(touches(k, r) for k in swept for r in constraint.reads):
            continue
        reason = constraint.check(cfg)
        if reason:
            raise ConfigError(f"infeasible configuration: {reason}")
