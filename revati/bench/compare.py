"""`revati validate`: the same benchmark on the emulated engine as a real run recorded, and
every summary metric side by side with its relative error.

The real side is the JSON `vllm bench serve --save-result --save-detailed` wrote on a GPU.
Its per-request input and output lengths and send times become a trace that the emulated
side's `vllm bench serve` replays at the recorded times (the timed_trace dataset), so the
same requests arrive in the same pattern whatever dataset and arrival process the real run
used. The per-request lengths of both runs are compared to prove it."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from revati.bench.errors import BenchError
from revati.bench.options import BenchOptions
from revati.bench.server import run_bench
from revati.workload import datasets

# what the report leads with; every other numeric key both sides have follows
HEADLINE = ["mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms",
            "p99_tpot_ms", "mean_itl_ms", "p99_itl_ms", "mean_e2el_ms", "request_throughput",
            "output_throughput", "total_token_throughput", "duration"]
NOT_COMPARED = {"num_prompts", "request_rate", "burstiness", "max_concurrency", "completed",
                "failed", "total_input_tokens", "total_output_tokens", "wall_s", "measured_wall_s",
                "num_gpu_blocks", "predictor_coverage", "rtfx"}


def read_result(path: Path) -> dict:
    """A `vllm bench serve --save-result` JSON, gzipped (.gz) or not."""
    try:
        data = path.read_bytes()
        result = json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)
    except (gzip.BadGzipFile, EOFError, ValueError) as e:   # ValueError: json's
        raise BenchError(f"--real {path}: not a `vllm bench serve` result ({e})") from e
    except OSError as e:
        raise BenchError(f"--real {path}: {e.strerror or e}") from e
    if not isinstance(result, dict):
        raise BenchError(f"--real {path}: not a `vllm bench serve` result")
    return result


def recorded_requests(real: dict) -> list[datasets.Request]:
    """The real run's requests with their send times relative to the first."""
    ins, outs, starts = real.get("input_lens"), real.get("output_lens"), real.get("start_times")
    if not ins or not outs or not starts:
        raise BenchError("the real result has no per-request lengths and send times: record "
                         "it with `vllm bench serve --save-result --save-detailed`")
    t0 = min(starts)
    return [datasets.Request(t - t0, i, o) for t, i, o in zip(starts, ins, outs, strict=True)]


# pNN_ttft_ms, pNN_itl_ms: percentiles of the per-sample lists a detailed result holds
PERCENTILE = re.compile(r"p(\d+(?:\.\d+)?)_(ttft|itl)_ms")


def samples_ms(result: dict, kind: str) -> list[float]:
    """A detailed result's TTFT of each request, or every inter-token latency, in ms."""
    if kind == "ttft":
        return [t * 1e3 for t in result.get("ttfts") or []]
    return [t * 1e3 for gaps in result.get("itls") or [] for t in gaps]


def compare(real: dict, emulated: dict, detailed: dict | None = None) -> list[dict]:
    """Each metric both sides report, with its relative error. With the emulated run's
    detailed result, a percentile row also gets `emulated_share`: the share of the emulated
    samples at or below the real percentile. SLO goodput counts samples under a threshold, and
    where the samples cluster (ITLs of decode-only steps, of steps with one prefill chunk, of
    steps with several) a percentile that falls between clusters moves by tens of percent for
    a few samples more or less above it; the share says how many."""
    keys = [k for k in HEADLINE if k in real and k in emulated]
    keys += sorted(k for k in real if k in emulated and k not in keys and k not in NOT_COMPARED
                   and isinstance(real[k], (int, float)) and isinstance(emulated[k], (int, float))
                   and not isinstance(real[k], bool))
    rows = []
    for k in keys:
        r, e = float(real[k]), float(emulated[k])
        row = {"metric": k, "real": r, "emulated": e, "rel_error": (e - r) / r if r else None}
        match = PERCENTILE.fullmatch(k)
        samples = samples_ms(detailed, match[2]) if detailed and match else []
        if samples:
            row["emulated_share"] = sum(x <= r for x in samples) / len(samples)
        rows.append(row)
    return rows


def render(rows: list[dict]) -> str:
    lines = ["| metric | real | emulated | error | emulated at or below real |",
             "|---|---:|---:|---:|---:|"]
    for row in rows:
        err = "n/a" if row["rel_error"] is None else f"{row['rel_error'] * 100:+.1f} %"
        share = f"{row['emulated_share'] * 100:.1f} %" if "emulated_share" in row else ""
        lines.append(f"| {row['metric']} | {row['real']:.2f} | {row['emulated']:.2f} | {err} "
                     f"| {share} |")
    return "\n".join(lines)


def validate(real_path: Path, opts: BenchOptions) -> tuple[list[dict], dict]:
    real = read_result(real_path)
    requests = recorded_requests(real)
    opts.out.mkdir(parents=True, exist_ok=True)
    opts.dataset, opts.num_prompts = "trace", None
    opts.trace = datasets.write_timed_trace(requests, opts.out / "real_requests.jsonl")
    opts.max_concurrency = real.get("max_concurrency")
    emulated = run_bench(opts)
    raw = json.loads((opts.out / "vllm_bench.json").read_text())
    if raw["input_lens"] != real["input_lens"] or raw["output_lens"] != real["output_lens"]:
        raise BenchError("the emulated run did not send the same requests as the real one")
    rows = compare(real, emulated, raw)
    report = {"real": str(real_path), "requests": len(requests),
              "real_request_rate": real.get("request_rate"), "rows": rows,
              "emulated_wall_s": emulated["wall_s"],
              "emulated_measured_wall_s": emulated.get("measured_wall_s"),
              "real_duration_s": real.get("duration"),
              "num_gpu_blocks_emulated": emulated["num_gpu_blocks"],
              "predictor_coverage": emulated["predictor_coverage"]}
    (opts.out / "validation.json").write_text(json.dumps(report, indent=2))
    (opts.out / "validation.md").write_text(render(rows) + "\n")
    return rows, report
