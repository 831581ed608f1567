"""The predicted GPU time each emulated process counts, read while it runs or after it ended.

With REVATI_PREDICT_TOTALS=<dir> the native predictor keeps its counters in <dir>/<pid>.totals,
a file it maps shared (predict/dispatch.c, g_totals): seven native int64 in the order of KEYS."""

from __future__ import annotations

import mmap
from pathlib import Path

# predict.h's rv_pred_source values, then predict/dispatch.c's T_BY_BATCH, T_UNSEEN,
# T_LAUNCH_ONLY, T_COLLECTIVE
KEYS = ("model_ns", "roofline_ns", "fixed_ns", "attention_by_batch_ns", "unseen_kernel_ns",
        "launch_only_ns", "collective_ns")


def read_totals(folder: Path) -> dict[str, int]:
    """The counters of every process that predicted with folder as its REVATI_PREDICT_TOTALS,
    summed by key; each as current as the last launch its process predicted."""
    totals = dict.fromkeys(KEYS, 0)
    for f in folder.glob("*.totals"):
        if f.stat().st_size < 8 * len(KEYS):  # just created, not yet sized: nothing counted
            continue
        with f.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
            # eight-byte loads from the live mapping: a counter is never read half-updated
            # (a plain read() of the file may copy it byte by byte)
            with memoryview(m) as view, view.cast("q") as counters:
                for key, ns in zip(KEYS, counters, strict=True):
                    totals[key] += ns
    return totals
