"""`revati bench`'s input, checked before anything starts: a value that cannot work ends the
command at once with one line that names it and says what would be valid (BenchError), not
after a minute of engine start-up. What only the engine can judge (its own flags) it judges."""

from __future__ import annotations

import math
import os
import tempfile
from typing import TYPE_CHECKING

from revati.bench.errors import BenchError
from revati.device.spec import load_spec
from revati.engines import ENGINES, versions
from revati.models.catalog import UnknownModelError, load_model
from revati.models.layout import context_problem, layout_problem, memory_problem
from revati.models.sizing import DTYPE_BYTES, engine_dtypes
from revati.workload import datasets

if TYPE_CHECKING:
    from revati.bench.options import BenchOptions


def engine_flag(args: list[str], flag: str) -> str | None:
    """The value of `flag` among engine arguments (`--flag V` or `--flag=V`), the last one."""
    value = None
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith(flag + "="):
            value = a.split("=", 1)[1]
    return value


def _at_least(name: str, value: int | None, low: int) -> None:
    if value is not None and value < low:
        raise BenchError(f"{name} must be at least {low}, not {value}")


def check_numbers(opts: BenchOptions) -> None:
    _at_least("--num-prompts", opts.num_prompts, 1)
    _at_least("--input-len", opts.input_len, 1)
    _at_least("--output-len", opts.output_len, 1)
    _at_least("--max-concurrency", opts.max_concurrency, 1)
    _at_least("--num-warmups", opts.num_warmups, 0)
    _at_least("--tp", opts.tp, 1)
    _at_least("--pp", opts.pp, 1)
    if not opts.request_rate > 0:   # inf is a burst; nan fails too
        raise BenchError(f"--request-rate must be above 0 (inf: all at once), "
                         f"not {opts.request_rate}")
    if not opts.burstiness > 0:
        raise BenchError(f"--burstiness must be above 0, not {opts.burstiness}")
    if not 0 <= opts.range_ratio < 1:
        raise BenchError(f"--range-ratio must be in [0, 1), not {opts.range_ratio}")
    if opts.cpu_dilation is not None and opts.cpu_dilation < 1 and opts.cores == 0:
        raise BenchError(f"--cpu-dilation {opts.cpu_dilation:g}: a factor below 1 slows the "
                         f"clock rate, which --cores off turns off")
    if opts.port is not None and not 1 <= opts.port <= 65535:
        raise BenchError(f"--port must be from 1 to 65535, not {opts.port}")


# what lets vLLM and SGLang serve a context beyond the model's positions
LONG_CONTEXT_VARIABLES = ("VLLM_ALLOW_LONG_MAX_MODEL_LEN",
                          "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN")


def context_length(opts: BenchOptions, config: dict) -> tuple[int, str]:
    """The context a request may fill and what set it: the engine's flag when given (a
    value the engine reads otherwise is its to judge), else the model's position limit."""
    engine = ENGINES[versions.split(opts.engine)[0]]
    flag = engine.CONTEXT_FLAG
    given = engine_flag(opts.engine_args, flag)
    tokens = engine.context_value(given) if given is not None else None
    positions = int(config["max_position_embeddings"])
    if tokens is not None:
        # both engines refuse a context beyond the model's positions (unless an environment
        # variable of theirs allows it, which a user who sets it can pass to the engine)
        if tokens > positions and not any(v in os.environ for v in LONG_CONTEXT_VARIABLES):
            shown = given if str(tokens) == given else f"{given} ({tokens:,} tokens)"
            raise BenchError(f"{flag}={shown} exceeds max_position_embeddings={positions} of "
                             f"{opts.model}")
        return tokens, flag
    return positions, f"{opts.model}'s max_position_embeddings"


def check_requests(opts: BenchOptions, max_len: int, setting: str) -> None:
    """The load's requests against the context; a trace is read (and so checked) in full."""
    if opts.dataset != "trace" and not opts.num_prompts:
        raise BenchError(f"dataset {opts.dataset!r} needs a number of prompts")
    if opts.dataset == "random":
        # vLLM's random dataset draws lengths up to len x (1 + range_ratio)
        problem = context_problem(math.floor(opts.input_len * (1 + opts.range_ratio)),
                                  math.floor(opts.output_len * (1 + opts.range_ratio)),
                                  max_len, setting)
        if problem:
            raise BenchError(problem)
    elif opts.dataset == "trace":
        if opts.trace is None:
            raise BenchError("dataset 'trace' needs a trace file (--trace FILE)")
        try:
            requests = datasets.load_trace(opts.trace)
        except datasets.DatasetError as e:
            raise BenchError(str(e)) from e
        longest = max(requests[:opts.num_prompts or None],
                      key=lambda r: r.input_len + r.output_len)
        problem = context_problem(longest.input_len, longest.output_len, max_len, setting)
        if problem:
            raise BenchError(f"trace {opts.trace}: a request's {problem}")
    elif opts.dataset not in datasets.DATASETS:
        raise BenchError(f"unknown dataset {opts.dataset!r} "
                         f"(known: {', '.join(datasets.DATASETS)})")


def check_memory(opts: BenchOptions, config: dict, hardware: str, max_len: int,
                 setting: str) -> None:
    """The layout's weights (and, where the engine asks for it, the KV cache of one request
    of the whole context) fit the GPU memory the engine takes: a 70B model on one H200 fails
    here at once instead of after the engine's minute of start-up. Weights that quantization
    or CPU offload shrink, and dtypes it does not know, are the engine's to judge."""
    engine = ENGINES[versions.split(opts.engine)[0]]
    args = opts.engine_args
    w_dtype, kv_dtype = engine_dtypes(engine_flag(args, "--dtype") or "auto",
                                      engine_flag(args, "--kv-cache-dtype") or "auto",
                                      config.get("torch_dtype", "bfloat16"))
    if ({w_dtype, kv_dtype} - DTYPE_BYTES.keys()
            or any(engine_flag(args, f) is not None for f in engine.WEIGHT_FLAGS)):
        return
    given = engine_flag(args, engine.MEMORY_FLAG)
    if given is None:
        share = engine.MEMORY_DEFAULT or 1.0
        shown = f"{share} ({'its default' if engine.MEMORY_DEFAULT else 'the whole GPU'})"
    else:
        try:
            share, shown = float(given), given
        except ValueError:
            return
    spec = load_spec(hardware)
    # the context counts where the engine asks for it and a flag set it: a model's own limit
    # may be one the engine shortens
    kv_tokens = max_len if engine.KV_FOR_ONE_CONTEXT and setting == engine.CONTEXT_FLAG else 0
    problem = memory_problem(
        opts.model, config, opts.tp, opts.pp, weight_dtype=w_dtype, kv_dtype=kv_dtype,
        context_tokens=kv_tokens,
        usable_bytes=spec.memory_bytes * share - spec.context_reserved_bytes,
        total_bytes=spec.memory_bytes, setting=f"{engine.MEMORY_FLAG}={shown}")
    if problem:
        raise BenchError(problem)


def check_out(opts: BenchOptions) -> None:
    """The output folder exists (made if need be) and takes files."""
    try:
        opts.out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=opts.out):
            pass
    except OSError as e:
        raise BenchError(f"--out {opts.out}: cannot write there ({e.strerror})") from e


def check_options(opts: BenchOptions, hardware: str) -> None:
    """Everything about a `revati bench` run that can be judged before it starts (hardware:
    the resolved revati/conf/hardware name)."""
    check_numbers(opts)
    try:
        versions.check(opts.engine)
    except versions.EngineVersionError as e:
        raise BenchError(str(e)) from None
    try:
        config = load_model(opts.model).config
    except UnknownModelError as e:
        raise BenchError(str(e)) from e
    gpus, per_node = opts.tp * opts.pp, load_spec(hardware).gpus_per_node
    if gpus > per_node:
        raise BenchError(f"--tp {opts.tp} x --pp {opts.pp} = {gpus} GPUs; one {hardware} node "
                         f"has {per_node}")
    problem = layout_problem(opts.model, config, opts.tp, opts.pp)
    if problem:
        raise BenchError(problem)
    max_len, setting = context_length(opts, config)
    check_requests(opts, max_len, setting)
    check_memory(opts, config, hardware, max_len, setting)
    check_out(opts)
