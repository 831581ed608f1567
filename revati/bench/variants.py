"""`revati compare`: the same load on several engine configurations, side by side.

Each variant is the run's engine flags plus its own (`--variant NAME=FLAGS`), on the run's
engine release or its own (FLAGS beginning with `--engine vllm==0.33.0`): one emulated
server per variant, started fresh, serves the load `repeat` times (the first run also warms
it further), and each metric is reported per variant as the median of the runs with their
range, then as the difference of the medians from the first variant. A difference whose
ranges overlap reads as "within spread": the emulator's run-to-run noise could give it.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import statistics
from dataclasses import dataclass
from pathlib import Path

from revati.bench.checks import check_options
from revati.bench.errors import BenchError
from revati.bench.options import BenchOptions
from revati.bench.server import EmulatedServer, resolve_hardware

# what the table shows, in order: (summary key, label)
METRICS = (("mean_ttft_ms", "mean TTFT ms"), ("p99_ttft_ms", "p99 TTFT ms"),
           ("mean_tpot_ms", "mean TPOT ms"), ("p99_itl_ms", "p99 ITL ms"),
           ("output_throughput", "output tok/s"), ("request_throughput", "req/s"),
           ("unseen_kernel_share", "unseen kernel share"))


@dataclass(frozen=True)
class Variant:
    name: str
    engine_args: tuple[str, ...]
    engine: str | None = None  # its own engine release (revati bench --engine), if any


def parse_variant(text: str) -> Variant:
    """NAME=FLAGS, FLAGS the engine's flags as one shell-quoted string (may be empty),
    optionally beginning with `--engine NAME[==VERSION]`, the release this variant runs."""
    name, sep, flags = text.partition("=")
    if not sep or not name.strip():
        raise ValueError(f"--variant {text!r}: expected NAME=FLAGS, e.g. "
                         "'seqs64=--max-num-seqs 64', 'default=' or 'new=--engine vllm==0.33.0'")
    args = shlex.split(flags)
    engine = None
    if args[:1] == ["--engine"]:
        if len(args) < 2:
            raise ValueError(f"--variant {text!r}: --engine needs a release, e.g. vllm==0.33.0")
        engine, args = args[1], args[2:]
    elif args and args[0].startswith("--engine="):
        engine, args = args[0].split("=", 1)[1], args[1:]
    return Variant(name.strip(), tuple(args), engine)


def run_variants(opts: BenchOptions, variants: list[Variant], repeat: int
                 ) -> dict[str, list[dict]]:
    """variant name -> the summaries of its runs (OUT/<name>/run<i>/summary.json)."""
    if len({v.name for v in variants}) != len(variants) or len(variants) < 2:
        raise BenchError("revati compare needs two or more variants with distinct names")
    if repeat < 1:
        raise BenchError(f"--repeat {repeat}: at least one run per variant")
    each = [dataclasses.replace(opts, out=opts.out / v.name, engine=v.engine or opts.engine,
                                engine_args=[*opts.engine_args, *v.engine_args])
            for v in variants]
    for vopts in each:  # every variant's release and flags before any server starts
        check_options(vopts, resolve_hardware(opts.hardware))
    runs: dict[str, list[dict]] = {}
    for v, vopts in zip(variants, each, strict=True):
        vopts.out.mkdir(parents=True, exist_ok=True)
        print(f"[revati compare] {v.name}: {vopts.engine}, engine flags "
              f"{' '.join(vopts.engine_args) or '(none)'}", flush=True)
        with EmulatedServer(vopts) as server:
            for i in range(repeat):
                s = server.run_load(vopts, vopts.out / f"run{i}")
                # over the measured requests: the engine's start-up is not the load's
                s["unseen_kernel_share"] = (s.get("predictor_measured") or {}).get(
                    "unseen_kernel_share")
                runs.setdefault(v.name, []).append(s)
    return runs


def table(runs: dict[str, list[dict]]) -> tuple[str, dict]:
    """The comparison as Markdown and as a dict (compare.json)."""
    names = list(runs)
    base = names[0]
    rows: dict[str, dict] = {}
    lines = ["| metric | " + " | ".join(f"{n} median [min-max]" for n in names)
             + " | " + " | ".join(f"{n} vs {base}" for n in names[1:]) + " |",
             "|---|" + "---:|" * (2 * len(names) - 1),
             "| engine release | " + " | ".join(_release(runs[n]) for n in names)
             + " |" * len(names)]
    for key, label in METRICS:
        values = {n: [r[key] for r in runs[n] if r.get(key) is not None] for n in names}
        if not all(values.values()):
            continue
        stats = {n: (statistics.median(v), min(v), max(v)) for n, v in values.items()}
        cells = [f"{m:.4g} [{lo:.4g}-{hi:.4g}]" for m, lo, hi in stats.values()]
        deltas = {}
        for n in names[1:]:
            (m0, lo0, hi0), (m, lo, hi) = stats[base], stats[n]
            delta = (m / m0 - 1) * 100 if m0 else None
            within = lo <= hi0 and lo0 <= hi  # the two ranges overlap
            deltas[n] = {"delta_pct": delta, "within_spread": within}
            cells.append("n/a" if delta is None else
                         f"{delta:+.1f} %" + (" (within spread)" if within else ""))
        rows[key] = {"values": values, "median": {n: s[0] for n, s in stats.items()},
                     "vs_" + base: deltas}
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines), rows


def _release(runs: list[dict]) -> str:
    return (runs[0].get("revati") or {}).get("release", "?")


def write(out: Path, text: str, rows: dict, runs: dict[str, list[dict]]) -> None:
    (out / "compare.md").write_text(text + "\n")
    (out / "compare.json").write_text(json.dumps(
        {"variants": list(runs), "releases": {n: _release(r) for n, r in runs.items()},
         "runs": len(next(iter(runs.values()))), "metrics": rows}, indent=2))
