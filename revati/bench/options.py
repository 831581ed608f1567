"""`revati bench`'s options, written once: each field of BenchOptions is one command-line
flag, with its help and parsing in the field's metadata. `revati bench` and `revati validate`
build their parsers from them (add_arguments), and the tuner renders a trial's command line
from a BenchOptions (command_line)."""

from __future__ import annotations

import argparse
import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from revati.engines import ENGINES
from revati.timewarp.timekeeper import parse_cores
from revati.workload.datasets import DATASETS


def parse_dilation(value: str) -> float | None:
    """A --cpu-dilation argument: `auto` (None: measured), `off` (1) or a factor from 0.1 to
    100."""
    if value == "auto":
        return None
    if value == "off":
        return 1.0
    try:
        f = float(value)
    except ValueError:
        f = 0.0
    if not 0.1 <= f <= 100.0:
        raise argparse.ArgumentTypeError(f"expected auto, off or a factor from 0.1 to 100, not "
                                         f"{value!r}")
    return f


def _cli(help: str | None = None, flag: str | None = None, **argparse_kw: Any) -> dict:
    """A field's command-line form: its help, its flag when not --field-name, and any other
    add_argument keyword."""
    return {"cli": {"help": help, "flag": flag, **argparse_kw}}


@dataclass
class BenchOptions:
    model: str = field(metadata=_cli("catalog name (revati/conf/model), e.g. llama3_8b"))
    hardware: str = field(metadata=_cli("revati/conf/hardware name or prefix, e.g. h200"))
    out: Path = field(metadata=_cli("output folder", type=Path))
    engine: str = field(default="vllm", metadata=_cli(
        f"serving engine, {' or '.join(sorted(ENGINES))}, optionally ==VERSION for a release "
        "beside the pinned one (requirements/ENGINE-VERSION.lock; its venv is made on first "
        "use)"))
    tp: int = field(default=1, metadata=_cli(type=int))
    pp: int = field(default=1, metadata=_cli(type=int))
    dataset: str = field(default="random", metadata=_cli(
        "random: --input-len/--output-len tokens; sharegpt: lengths drawn from the shipped "
        "ShareGPT distribution; trace: replay --trace", choices=DATASETS))
    trace: Path | None = field(default=None, metadata=_cli(
        "CSV or JSONL of timestamp (s), input_length, output_length per request, replayed "
        "at its own arrival times (--dataset trace)", type=Path, metavar="FILE"))
    input_len: int = field(default=1024, metadata=_cli(type=int))
    output_len: int = field(default=128, metadata=_cli(type=int))
    range_ratio: float = field(default=0.0, metadata=_cli(
        "random lengths in [len*(1-r), len*(1+r)]", type=float))
    # None: every request of the trace (the command line's default for --dataset trace)
    num_prompts: int | None = field(default=200, metadata=_cli(
        "requests to send (default: 200; a trace's every request)", type=int))
    request_rate: float = field(default=math.inf, metadata=_cli(
        "requests per virtual second (inf: all at once)", type=float))
    burstiness: float = field(default=1.0, metadata=_cli(
        "gamma shape of the inter-arrival times (1: Poisson, inf: fixed rate)", type=float))
    max_concurrency: int | None = field(default=None, metadata=_cli(type=int))
    # requests `vllm bench serve` sends (concurrently, unmeasured) before the measured load:
    # a warm server has compiled the kernels that first appear under load, such as the
    # Triton top-k/top-p sampler at 8 or more running requests
    num_warmups: int = field(default=0, metadata=_cli(
        "unmeasured requests sent at once before the load, to warm the engine up (16 "
        "reaches the batch sizes whose kernels compile on first use)", type=int))
    seed: int = field(default=0, metadata=_cli(type=int))
    port: int | None = field(default=None, metadata=_cli(
        "engine port (default: a free one)", type=int))
    ready_timeout_s: float = field(default=1800.0, metadata=_cli(
        flag="--ready-timeout", type=float, metavar="SECONDS"))
    engine_python: Path | None = field(default=None, metadata=_cli(
        "interpreter that has the engine", type=Path))
    engine_args: list[str] = field(default_factory=list, metadata=_cli(
        flag="engine_args", nargs=argparse.REMAINDER, metavar="-- ENGINE FLAGS"))
    log_level: str = field(default="warn", metadata=_cli(
        choices=["error", "warn", "info", "debug"]))
    # the clock rate's correction of CPU work (revati run --cores, and the GPU node's speed):
    # None uses this host's cores, 0 is off
    cores: int | None = field(default=None, metadata=_cli(
        "count CPU work at the GPU node's speed with a core each, as for `revati run --cores` "
        "(default: auto, this host's cores; docs/timewarp.md)", type=parse_cores,
        metavar="N|auto|off"))
    # how many times the clock rate's time GPU-driving threads count their CPU time
    # (REVATI_CPU_DILATION): None measures it (PyTorch's dispatch on the node against the
    # Python workload's speed), 1.0 is off
    cpu_dilation: float | None = field(default=None, metadata=_cli(
        "GPU-driving threads count F times the virtual time the clock rate gives their CPU "
        "time (default auto: the GPU node's PyTorch dispatch against the rate's speed, from "
        "revati/conf/hardware; below 1 needs --cores; docs/timewarp.md)",
        type=parse_dilation, metavar="auto|off|F"))
    # OUT/gpu_trace.json: every emulated GPU operation and clock jump (Chrome trace)
    gpu_trace: bool = field(default=False, metadata=_cli(
        "write OUT/gpu_trace.json, a Chrome trace (chrome://tracing, Perfetto) of every "
        "emulated kernel, copy and collective on its stream and of the clock's jumps, in "
        "virtual time: ~150 bytes a kernel, so keep the load short", action="store_true"))


FIELDS = {f.name: f for f in dataclasses.fields(BenchOptions)}
REQUIRED = ("model", "hardware", "out")
# the options of the load and its run, not of the engine: one started engine serves loads
# that differ only in these (EmulatedServer.run_load; the tuner's shared engines)
LOAD = ("dataset", "trace", "input_len", "output_len", "range_ratio", "num_prompts",
        "request_rate", "burstiness", "max_concurrency", "num_warmups", "seed", "out",
        "ready_timeout_s")


def _flag(name: str) -> str:
    return FIELDS[name].metadata["cli"]["flag"] or "--" + name.replace("_", "-")


def add_arguments(p: argparse.ArgumentParser, names: list[str] | None = None,
                  help: dict[str, str] | None = None) -> None:
    """Add the flags of these options (default: all) to p; `help` replaces some helps."""
    names = names or list(FIELDS)
    # the engine's flags last: everything after `--` is theirs
    for name in sorted(names, key=lambda n: n == "engine_args"):
        kw = {k: v for k, v in FIELDS[name].metadata["cli"].items() if k != "flag"}
        kw["help"] = (help or {}).get(name, kw["help"])
        flag = _flag(name)
        if flag.startswith("--"):
            kw["dest"] = name
            if name in REQUIRED:
                kw["required"] = True
            # the trace's own count is every request: None until the dataset is known
            elif name != "num_prompts" and kw.get("action") != "store_true":
                kw["default"] = FIELDS[name].default
        p.add_argument(flag, **kw)


def from_args(args: argparse.Namespace) -> BenchOptions:
    """The options a parser built by add_arguments read (flags it lacks keep defaults)."""
    given = {n: getattr(args, n) for n in FIELDS if hasattr(args, n)}
    extra = given.get("engine_args", [])
    given["engine_args"] = extra[1:] if extra[:1] == ["--"] else extra
    if "num_prompts" in given and given["num_prompts"] is None and given["dataset"] != "trace":
        given["num_prompts"] = FIELDS["num_prompts"].default
    return BenchOptions(**given)


def command_line(opts: BenchOptions, explicit: tuple[str, ...] = REQUIRED) -> list[str]:
    """`revati bench`'s arguments for opts: the `explicit` options, and every other one that
    differs from its default."""
    argv: list[str] = []
    for name, f in FIELDS.items():
        value = getattr(opts, name)
        if name == "engine_args" or value is None:  # None: the flag's absence means it
            continue
        # a trace's default count is its every request, not the field's default
        at_default = value == f.default and not (name == "num_prompts" and opts.dataset == "trace")
        if at_default and name not in explicit:
            continue
        if f.metadata["cli"].get("action") == "store_true":
            argv += [_flag(name)] if value else []
        else:  # every option's parser reads its value back from str()
            argv += [_flag(name), str(value)]
    return [*argv, "--", *opts.engine_args]
