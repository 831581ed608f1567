"""How well does the shipped predictor time attention launches that mix decodes with prefill
chunks? (issue #25, item 2)

Reads FA3 calls timed on the H200 (tools/device/fa3_mixed.sh: each call's kernels with the
call's per-sequence lengths), reports each call's lengths to the C predictor as the engine's
batch observer does (rv_attention_batch), predicts every kernel of the call from its launch
(rv_predict_ns), and prints the error by kernel and over the calls' whole GPU time.

    .venv/bin/python tools/fidelity/mixed_attention.py \\
        revati/predict/data/profiles/h200/rows/fa3_mixed_a.jsonl.gz [...]
"""

from __future__ import annotations

import ctypes
import os
import sys
import tempfile
from pathlib import Path

import pandas as pd

KINDS = (("main", r"FlashAttnFwdSm90"), ("prepare", r"prepare_varlen"),
         ("combine", r"FlashAttnFwdCombine"), ("fill", r"FillFunctor"))


def predictor_env(spec_file: Path) -> dict[str, str]:
    from revati.predict import registry
    from revati.predict.hwprofile import read_profile

    spec_file.write_text(read_profile(registry.profile_dir("h200")).spec.flat_text())
    return {k: str(v) for k, v in registry.predictor_env("h200", spec_file).items()}


def predict(rows: pd.DataFrame) -> pd.Series:
    from revati.predict import features as F

    lib, src, out = F.native(), ctypes.c_int(), []
    for _, call in rows.groupby("point", sort=False):
        first = call.iloc[0]
        q, kv = list(first["q_lens"]), list(first["kv_lens"])
        n = len(q)
        lib.rv_attention_batch(n, (ctypes.c_int64 * n)(*q), (ctypes.c_int64 * n)(*kv),
                               int(first["heads"]), int(first["kv_heads"]),
                               int(first["head_dim"]))
        for idx, r in call.iterrows():
            launch = F.to_launch(r.to_dict())
            out.append((idx, lib.rv_predict_ns(ctypes.byref(launch), ctypes.byref(src))))
    return pd.Series(dict(out)).sort_index()


def report(rows: pd.DataFrame) -> str:
    rows = rows.assign(kind="other")
    for kind, pattern in KINDS:
        rows.loc[rows.kernel.str.contains(pattern, regex=True), "kind"] = kind
    lines = ["| kernels | launches | GPU-time weighted error | mean error | signed (sum) |",
             "|---|---:|---:|---:|---:|"]
    groups = [(k, g) for k, g in rows.groupby("kind")] + [("all", rows)]
    for kind, g in groups:
        err = g.predicted - g.duration_ns
        lines.append(f"| {kind} | {len(g)} | {err.abs().sum() / g.duration_ns.sum():.1%} | "
                     f"{(err.abs() / g.duration_ns).mean():.1%} | "
                     f"{err.sum() / g.duration_ns.sum():+.1%} |")
    calls = rows.groupby("point")[["predicted", "duration_ns"]].sum()
    err = calls.predicted - calls.duration_ns
    lines.append(f"\nper call (all its kernels): {len(calls)} calls, GPU-time weighted error "
                 f"{err.abs().sum() / calls.duration_ns.sum():.1%}, signed "
                 f"{err.sum() / calls.duration_ns.sum():+.1%}")
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    if "REVATI_HW_SPEC" not in os.environ:  # the C predictor reads its setup at load
        spec = Path(tempfile.mkdtemp(prefix="revati-mixed-")) / "h200.spec"
        os.execve(sys.executable, [sys.executable, *sys.argv],
                  {**os.environ, **predictor_env(spec)})
    # a call is a point of one file: the files may time the same points again
    rows = pd.concat([pd.read_json(p, lines=True).assign(point=lambda d, i=i: d.point + i * 10**6)
                      for i, p in enumerate(sys.argv[1:])], ignore_index=True)
    rows["predicted"] = predict(rows)
    print(report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
