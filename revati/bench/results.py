"""What a bench run writes: summary.json's keys beside the client's own, and requests.csv."""

from __future__ import annotations

import bisect
import csv
import json
import re
from collections import Counter
from pathlib import Path

from revati.timewarp.timekeeper import Contention

RAW_RESULT = "vllm_bench.json"
# arrays of per-request detail that go to requests.csv rather than summary.json
DETAIL_KEYS = ("input_lens", "output_lens", "ttfts", "itls", "start_times", "errors",
               "generated_texts")


def predictor_summary(totals: dict[str, int]) -> dict[str, float | None]:
    """The summary's predictor keys from the engine processes' totals: predictor_coverage,
    the share of predicted GPU time that came from measured models rather than the roofline;
    unseen_kernel_share, the share from kernels the models never saw; launch_only_share, the
    share of attention, GEMM and fused-MoE kernels predicted from their launch alone (their
    shape unknown: the least accurate models, docs/predictor.md); collective_share, the share
    of collectives and vLLM's custom all-reduce (from the hardware spec's collective table,
    else the NVLink roofline); attention_by_batch_s, the attention time predicted from the
    batches the engine's observer reported."""
    known = totals.get("model_ns", 0) + totals.get("roofline_ns", 0)
    predicted = known + totals.get("fixed_ns", 0)
    return {"predictor_coverage": totals.get("model_ns", 0) / known if known else None,
            "attention_by_batch_s": totals.get("attention_by_batch_ns", 0) / 1e9,
            "unseen_kernel_share": (totals.get("unseen_kernel_ns", 0) / predicted
                                    if predicted else None),
            "launch_only_share": (totals.get("launch_only_ns", 0) / predicted
                                  if predicted else None),
            "collective_share": (totals.get("collective_ns", 0) / predicted
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
    summary["collective_share"] = None
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
