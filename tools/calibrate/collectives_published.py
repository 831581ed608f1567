"""Collective durations on H100/H200 NVSwitch nodes from published measurements: the
`collectives` table of revati/conf/hardware/h200_sxm.yaml (issue #26, item 3), until the collectives
are measured on the lent multi-GPU H200s (tools/calibrate/nccl_h200.py).

    python tools/calibrate/collectives_published.py

Reads revati/predict/data/collectives/h100_h200_nvswitch_published.csv (its README says where
every published row comes from and how it was read) and, per collective and rank count, fits

    t = alpha + wire_bytes / busbw

with wire_bytes the bytes each rank moves over NVLink as the predictor counts them (`wire`
below; for NCCL's collectives nccl-tests' bus-bandwidth convention, checked against every
published busbw first), minimising the relative error. Rank counts without published rows
(and sizes a rank count's rows do not reach) get derived rows first, from the fit of a measured
neighbour (DERIVED below): the ring model, in which latency grows with the steps a collective
takes and the bus bandwidth is the same at every rank count. The derived rows are rewritten in
the CSV (published rows are left as they are), the fit's error is printed per point, and the
fitted table replaces the `collectives` block of the spec.
"""

from __future__ import annotations

import csv
import pathlib
import re
import sys
from collections.abc import Callable

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from revati.device.spec import COLLECTIVE_OPS  # noqa: E402

DATA = REPO / "revati/predict/data/collectives/h100_h200_nvswitch_published.csv"
SPEC = REPO / "revati/conf/hardware/h200_sxm.yaml"
FIELDS = ("op", "nranks", "bytes", "time_us", "busbw_gbps", "gpu", "source_id", "derived")

# Bytes each rank moves over NVLink for a collective over `size` bytes (the largest buffer, the
# size nccl-tests report), as roofline.c counts them. NCCL's: nccl-tests' bus-bandwidth factors
# (doc/PERFORMANCE.md), so busbw = wire / time. vLLM's custom all-reduce (csrc/
# custom_all_reduce.cuh): the one-stage kernel reads the whole buffer from every peer, the
# two-stage one reduce-scatters then all-gathers.
WIRE: dict[str, Callable[[int], float]] = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
    "custom_allreduce_1stage": lambda n: n - 1.0,
    "custom_allreduce_2stage": lambda n: 2 * (n - 1) / n,
}
# Latency steps of each collective in the ring model: NCCL's ring passes a chunk n - 1 times
# (all-reduce: reduce-scatter, then all-gather), a send/recv once. The custom all-reduce
# synchronises all ranks at fixed barriers, whatever their number.
STEPS: dict[str, Callable[[int], float]] = {
    "allreduce": lambda n: 2 * (n - 1),
    "allgather": lambda n: n - 1,
    "reducescatter": lambda n: n - 1,
    "broadcast": lambda n: n - 1,
    "sendrecv": lambda n: 1,
    "custom_allreduce_1stage": lambda n: 1,
    "custom_allreduce_2stage": lambda n: 1,
}
# (collective, ranks) -> the measured (collective, ranks) its derived rows come from: alpha
# scaled by the ratio of steps, the same bus bandwidth (nccl-tests define busbw to be
# independent of the rank count). Broadcast and send/recv, of which no H100/H200 figure was
# found, follow all-gather: like it they copy without reducing along the ring, a send/recv
# being one step of it. The custom all-reduce at 2 and 8 ranks follows the nearest rank count
# measured, with its own traffic (WIRE).
DERIVED: dict[tuple[str, int], tuple[str, int]] = {
    ("allreduce", 2): ("allreduce", 8),
    ("allreduce", 4): ("allreduce", 8),
    ("allgather", 2): ("allgather", 8),
    ("allgather", 4): ("allgather", 8),
    ("reducescatter", 2): ("reducescatter", 8),
    ("reducescatter", 4): ("reducescatter", 8),
    ("broadcast", 2): ("allgather", 8),
    ("broadcast", 4): ("allgather", 8),
    ("broadcast", 8): ("allgather", 8),
    ("sendrecv", 2): ("allgather", 8),
    ("custom_allreduce_1stage", 2): ("custom_allreduce_1stage", 4),
    ("custom_allreduce_1stage", 8): ("custom_allreduce_1stage", 6),
    ("custom_allreduce_2stage", 8): ("custom_allreduce_2stage", 6),
}

Pair = tuple[str, int]
Fit = tuple[float, float]  # alpha_us, busbw_gbps


def wire(op: str, n: int, size: int) -> float:
    return WIRE[op](n) * size


def model_us(fit: Fit, op: str, n: int, size: int) -> float:
    alpha, busbw = fit
    return alpha + wire(op, n, size) / (busbw * 1e3)  # bytes / (GB/s) in us


def read_rows() -> list[dict[str, str]]:
    with DATA.open() as f:
        rows = list(csv.DictReader(f))
    bad = [r for r in rows if r["op"] not in COLLECTIVE_OPS]
    if bad:
        raise SystemExit(f"{DATA}: unknown collective {bad[0]['op']!r}")
    return rows


def key(row: dict[str, str]) -> Pair:
    return row["op"], int(row["nranks"])


def check_busbw(rows: list[dict[str, str]]) -> None:
    """Every published busbw is wire / time within the rounding of the printed figures (two
    decimals of GB/s, and of microseconds): the wire bytes are nccl-tests' convention."""
    for r in rows:
        op, n = key(r)
        t, busbw = float(r["time_us"]), float(r["busbw_gbps"])
        ours = wire(op, n, int(r["bytes"])) / (t * 1e3)
        if abs(ours - busbw) > 0.0051 + ours * (0.0051 / t + 1e-3):
            raise SystemExit(f"{DATA}: {op} x{n} {r['bytes']} B: busbw {busbw} is not "
                             f"wire / time ({ours:.3f} GB/s)")


def fit(rows: list[dict[str, str]]) -> Fit:
    """alpha, busbw minimising the relative error: least squares of (alpha + c w) / t - 1 over
    the rows, linear in alpha and c = 1 / busbw; alpha is not negative."""
    op, n = key(rows[0])
    t = np.array([float(r["time_us"]) for r in rows])
    w = np.array([wire(op, n, int(r["bytes"])) / 1e3 for r in rows])  # bytes / 1e3: us x GB/s
    a = np.column_stack([1 / t, w / t])
    (alpha, c), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    if alpha < 0:
        alpha, c = 0.0, float(np.sum(w / t) / np.sum((w / t) ** 2))
    if not c > 0:
        raise SystemExit(f"{op} x{n}: no positive bandwidth fits {len(rows)} rows")
    return float(alpha), float(1 / c)


def derive(target: Pair, ref: Pair, ref_fit: Fit, ref_rows: list[dict[str, str]],
           have: set[int]) -> list[dict[str, str]]:
    """Rows of `target` at the reference's published sizes that it has no published row at,
    on the reference's GPUs."""
    op, n = target
    alpha = ref_fit[0] * STEPS[op](n) / STEPS[ref[0]](ref[1])
    gpus = "+".join(sorted({r["gpu"] for r in ref_rows}))
    out = []
    for size in sorted({int(r["bytes"]) for r in ref_rows} - have):
        t = model_us((alpha, ref_fit[1]), op, n, size)
        out.append({"op": op, "nranks": str(n), "bytes": str(size), "time_us": f"{t:.2f}",
                    "busbw_gbps": f"{wire(op, n, size) / (t * 1e3):.2f}", "gpu": gpus,
                    "source_id": f"derived:{ref[0]}@{ref[1]}", "derived": "1"})
    return out


def yaml_block(fits: dict[Pair, Fit]) -> str:
    lines = [
        "collectives:                     # t = alpha + wire bytes / busbw per rank count:",
        "                                 # [alpha_us, busbw_gbps], fitted by",
        "                                 # tools/calibrate/collectives_published.py to published",
        "                                 # H100/H200 figures (revati/predict/data/collectives/)",
        "  measured: false                # not yet measured on the lent multi-GPU H200s",
    ]
    for op in COLLECTIVE_OPS:
        ranks = sorted(n for o, n in fits if o == op)
        if ranks:
            entries = ", ".join(f"{n}: [{fits[op, n][0]:.2f}, {fits[op, n][1]:.1f}]"
                                for n in ranks)
            lines.append(f"  {op}: {{{entries}}}")
    return "\n".join(lines) + "\n"


def write_spec(block: str) -> None:
    """Replaces the spec's `collectives` block (the line and its indented or commented
    continuation), or inserts it before `topology:`."""
    text = SPEC.read_text()
    old = re.search(r"^collectives:.*\n(?:[ #].*\n)*", text, re.M)
    if old:
        text = text[:old.start()] + block + text[old.end():]
    else:
        at = re.search(r"^topology:", text, re.M)
        if not at:
            raise SystemExit(f"{SPEC}: no topology: to put the collectives block before")
        text = text[:at.start()] + block + text[at.start():]
    SPEC.write_text(text)


def main() -> int:
    rows = read_rows()
    published = [r for r in rows if r["derived"] == "0"]
    check_busbw(published)
    by_pair: dict[Pair, list[dict[str, str]]] = {}
    for r in published:
        by_pair.setdefault(key(r), []).append(r)
    derived: list[dict[str, str]] = []
    for target, ref in DERIVED.items():
        have = {int(r["bytes"]) for r in by_pair.get(target, [])}
        derived += derive(target, ref, fit(by_pair[ref]), by_pair[ref], have)
    for r in derived:
        by_pair.setdefault(key(r), []).append(r)
    with DATA.open("w", newline="") as f:
        out = csv.DictWriter(f, FIELDS, lineterminator="\n")
        out.writeheader()
        out.writerows(published + derived)

    fits = {pair: fit(pair_rows) for pair, pair_rows in by_pair.items()}
    print(f"{'collective':24} {'n':>2} {'bytes':>10} {'time_us':>9} {'model_us':>9} "
          f"{'error':>7}  source")
    worst: dict[Pair, float] = {}
    for pair in sorted(fits, key=lambda p: (COLLECTIVE_OPS.index(p[0]), p[1])):
        for r in sorted(by_pair[pair], key=lambda r: (int(r["bytes"]), r["source_id"])):
            t, m = float(r["time_us"]), model_us(fits[pair], *pair, int(r["bytes"]))
            worst[pair] = max(worst.get(pair, 0.0), abs(m / t - 1))
            print(f"{pair[0]:24} {pair[1]:>2} {r['bytes']:>10} {t:9.2f} {m:9.2f} "
                  f"{100 * (m / t - 1):+6.1f}%  {r['source_id']}")
    print(f"\n{'collective':24} {'n':>2} {'alpha_us':>9} {'busbw_GB/s':>10} {'rows':>5} "
          f"{'derived':>7} {'max error':>9}")
    for pair in sorted(fits, key=lambda p: (COLLECTIVE_OPS.index(p[0]), p[1])):
        n_der = sum(r["derived"] == "1" for r in by_pair[pair])
        print(f"{pair[0]:24} {pair[1]:>2} {fits[pair][0]:9.2f} {fits[pair][1]:10.1f} "
              f"{len(by_pair[pair]):5d} {n_der:7d} {100 * worst[pair]:8.1f}%")
    write_spec(yaml_block(fits))
    print(f"\nwrote {DATA.relative_to(REPO)} ({len(derived)} derived rows) and the collectives "
          f"block of {SPEC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
