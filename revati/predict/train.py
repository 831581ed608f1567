"""`revati predictor train`: one LightGBM model per kernel family from a hardware profile.

Target: log(measured / roofline), the roofline being the C predictor's own (features.py), so a
model learns the efficiency the roofline misses and stays sane outside the profiled range.
Evaluation: grouped k-fold cross-validation over sweep points (all rows of a point in one fold,
so no shape is seen in training and testing; every point held out once), MAPE plain and
GPU-time weighted, p90 absolute % error. The shipped model is then refitted on every point with
the same settings.

Writes, into the models folder: <family>.txt (LightGBM text format), index.txt (what the C
predictor loads: the spec trained against, models, kernel-name patterns, kernel vocabulary;
grammar in docs/predictor.md) and report.json (report.py prints it).
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd

from revati.predict.families import (
    ATTENTION_SHAPE,
    BY_NAME,
    FAMILIES,
    MOE_SHAPE,
    Family,
    family_of,
    match_order,
)
from revati.predict.features import (
    ATTENTION_SHAPE_OP,
    MOE_SHAPE_OP,
    Op,
    attention_feature_matrix,
    feature_matrix,
    feature_names,
    moe_feature_matrix,
)
from revati.predict.hwprofile import HardwareProfile, read_profile

MIN_ROWS = 20  # fewer distinct launches than this: the roofline predicts the family
PARAMS = {
    "objective": "regression", "learning_rate": 0.1, "num_leaves": 31,
    "min_data_in_leaf": 3, "min_data_per_group": 3, "cat_smooth": 1.0, "cat_l2": 1.0,
    "max_cat_to_onehot": 8, "feature_pre_filter": False, "verbose": -1, "num_threads": 2,
    "deterministic": True, "force_row_wise": True,
}
ROUNDS = 200  # with 31 leaves: ~6 MB of text models; 600 rounds gained <1% MAPE
# The targets by group (held-out, GPU-time weighted). Launch-only attention, GEMM and
# fused-MoE kernels are left out: the emulator predicts those by shape, by cuBLAS call and by
# routing; the fused-MoE GEMMs count as GEMMs.
GROUPS = {"gemm": (("gemm", "moe"), 0.05), "attention": (("attention_shape",), 0.08),
          "others": (("memcpy", "memset", "gemm_epilogue", "norm", "softmax_sampling", "reduce",
                      "embedding", "elementwise", "misc"), 0.10)}


@dataclass
class FamilyData:
    rows: pd.DataFrame
    X: np.ndarray
    names: list[str]
    vocab: list[str]


def assign_families(df: pd.DataFrame) -> pd.Series:
    return pd.Series([family_of(int(op), k) for op, k in zip(df.op, df.kernel, strict=True)],
                     index=df.index, dtype=object)


def family_data(rows: pd.DataFrame, family: str, spec_vector: list[float],
                vocab: list[str] | None = None) -> FamilyData:
    """Feature matrix of one family's rows. vocab: kernel names known to the model (built from
    the rows when None); names outside it get a missing kernel id, as in the C predictor."""
    op = BY_NAME[family].op
    if op in (Op.KERNEL, ATTENTION_SHAPE_OP):
        vocab = sorted(rows.kernel.unique()) if vocab is None else vocab
        index = {name: i for i, name in enumerate(vocab)}
        ids = [index.get(name, -1) for name in rows.kernel]
    else:
        vocab, ids = [], None
    records = rows.to_dict("records")
    if op == ATTENTION_SHAPE_OP:
        X = attention_feature_matrix(records, spec_vector, ids)
    elif op == MOE_SHAPE_OP:
        X = moe_feature_matrix(records, spec_vector)
    else:
        X = feature_matrix(records, spec_vector, ids)
    names = feature_names(op)
    assert names[-1] == "log_roofline_ns", names  # the target's base, see module doc
    return FamilyData(rows, X, names, vocab)


def _fit(data: FamilyData, mask: np.ndarray, seed: int, rounds: int) -> lgb.Booster:
    y = np.log(data.rows.duration_ns.to_numpy(dtype=float)) - data.X[:, -1]
    cat = ["kernel_id"] if "kernel_id" in data.names else []
    ds = lgb.Dataset(data.X[mask], y[mask], feature_name=data.names, categorical_feature=cat,
                     free_raw_data=False)
    return lgb.train({**PARAMS, "seed": seed}, ds, num_boost_round=rounds)


def predict_ns(booster: lgb.Booster, X: np.ndarray) -> np.ndarray:
    return np.exp(booster.predict(X) + X[:, -1])


def errors(pred: np.ndarray, true: np.ndarray) -> dict[str, float]:
    ape = np.abs(pred - true) / true
    return {"mape": float(ape.mean()),
            "weighted_mape": float(np.abs(pred - true).sum() / true.sum()),
            "p90_ape": float(np.quantile(ape, 0.9))}


def train(profile_dir: str | Path, out_dir: str | Path, folds: int = 5,
          seed: int = 0, rounds: int = ROUNDS) -> dict[str, object]:
    profile = read_profile(profile_dir)
    spec = profile.spec.vector()
    df = profile.launches.copy()
    df["family"] = assign_families(df)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    report: dict[str, object] = {
        "hardware": profile.spec.name, "profile": str(profile_dir),
        "profile_provenance": {k: profile.provenance.get(k) for k in
                               ("gpu", "driver", "cuda", "torch", "date", "command")},
        "trained": datetime.datetime.now(datetime.UTC).isoformat(),
        "folds": folds, "seed": seed, "rounds": rounds, "families": {}}
    index = ["# revati predictor index (revati predictor train); grammar: docs/predictor.md"]
    index += [f"spec {k} {v:.17g}" for k, v in profile.spec.values.items()]
    vocab_lines, models = [], {}
    oof: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # out-of-fold predictions, measured
    attention = df[(df.family == "attention") & (df.attn_batch > 0)]
    moe = df[(df.family == "moe_kernel") & (df.moe_experts > 0)]
    groups: list[tuple[Family, pd.DataFrame]] = [(f, df[df.family == f.name]) for f in FAMILIES]
    for fam, rows in [*groups, (ATTENTION_SHAPE, attention), (MOE_SHAPE, moe)]:
        entry: dict[str, object] = {"op": fam.name if fam.op in (ATTENTION_SHAPE_OP, MOE_SHAPE_OP)
                                    else Op(fam.op).name.lower(), "samples": len(rows),
                                    "target_mape": fam.target_mape}
        if len(rows) < MIN_ROWS:
            entry["source"] = "roofline"
            index.append(f"family {fam.name} {int(fam.op)}")
            report["families"][fam.name] = entry
            continue
        data = family_data(rows, fam.name, spec)
        # Grouped k-fold: every sweep point is held out exactly once, with all its rows, so
        # the errors cover the whole family rather than one lucky or unlucky draw.
        points = rows.point.unique()
        fold_of = dict(zip(rng.permutation(points), np.arange(len(points)) % folds,
                           strict=True))
        fold = rows.point.map(fold_of).to_numpy()
        pred = np.empty(len(rows))
        for f in range(folds):
            held = _fit(data, fold != f, seed, rounds)
            pred[fold == f] = predict_ns(held, data.X[fold == f])
        true = rows.duration_ns.to_numpy(dtype=float)
        entry.update(errors(pred, true))
        oof[fam.name] = (pred, true)
        entry["roofline"] = errors(np.exp(data.X[:, -1]), true)
        entry.update(source="model", gpu_time_ns=float(true.sum()), kernels=len(data.vocab))
        full = _fit(data, np.ones(len(rows), dtype=bool), seed, rounds)
        full.save_model(str(out / f"{fam.name}.txt"))
        models[fam.name] = (full, data.vocab)
        index.append(f"model {fam.name} {int(fam.op)} {len(data.names)} {fam.name}.txt")
        vocab_lines += [f"kernel {fam.name} {i} {name}" for i, name in enumerate(data.vocab)]
        report["families"][fam.name] = entry
    index += [f"pattern {fam} {p}" for p, fam in match_order()]
    index += vocab_lines
    (out / "index.txt").write_text("\n".join(index) + "\n")
    report["groups"] = {}
    for group, (members, target) in GROUPS.items():
        have = [oof[m] for m in members if m in oof]
        if have:
            pred, true = (np.concatenate(x) for x in zip(*have, strict=True))
            report["groups"][group] = {**errors(pred, true), "samples": len(true),
                                       "target_mape": target, "families": list(members)}
    if profile.e2e_kernels is not None:
        report["e2e"] = e2e_check(profile, models, spec)
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def e2e_check(profile: HardwareProfile, models: dict[str, tuple[lgb.Booster, list[str]]],
              spec: list[float]) -> dict[str, object]:
    """The e2e forward passes predicted as the emulator will see them, against measurement:
    GEMMs as the cuBLAS calls the forward makes (m, n, k known), attention kernels by shape,
    every other launch by its launch features; the roofline where no model exists.
    Keys: "<architecture>/<case>"."""
    from revati.predict.features import LAUNCH_COLUMNS, DType, roofline_ns
    from revati.profile import e2e
    from revati.profile.micro import gemm_call

    kernels = profile.e2e_kernels.copy()
    for col in set(LAUNCH_COLUMNS) - set(kernels.columns):
        kernels[col] = 0  # library-call fields: none for plain launches
    if "arch" not in kernels.columns:
        kernels["arch"] = e2e.DEFAULT_ARCH
    kernels["family"] = assign_families(kernels)
    cases: dict[str, object] = {}
    for arch in kernels.arch.unique():
        a = e2e.ARCHS[arch]
        for case, b, q_len, kv_len in e2e.CASES:
            g = kernels[(kernels.arch == arch) & (kernels.case == case)]
            if g.empty:
                continue
            calls = pd.DataFrame([gemm_call(m, n, k, DType.BF16, DType.BF16)
                                  for m, n, k in e2e.gemm_shapes(a, b * q_len, b)])
            attn = g[g.family == "attention"].assign(
                attn_batch=b, q_len=q_len, kv_len=kv_len, heads=a.heads, kv_heads=a.kv_heads,
                head_dim=a.head_dim)
            rest = g[~g.family.isin(["attention", "gemm_kernel"])]
            measured: dict[str, float] = {
                "gemm": float(g[g.family == "gemm_kernel"].duration_ns.sum()),
                "attention_shape": float(attn.duration_ns.sum())}
            parts = [("gemm", calls), ("attention_shape", attn)]
            for fam, sub in rest.groupby("family"):
                measured[str(fam)] = float(sub.duration_ns.sum())
                parts.append((str(fam), sub))
            predicted, fallback = {}, 0.0
            for fam, sub in parts:
                if fam in models:
                    booster, vocab = models[fam]
                    predicted[fam] = float(predict_ns(booster, family_data(sub, fam, spec,
                                                                           vocab).X).sum())
                else:
                    predicted[fam] = float(sum(roofline_ns(r, spec)
                                               for r in sub.to_dict("records")))
                    fallback += predicted[fam]
            total_m, total_p = sum(measured.values()), sum(predicted.values())
            cases[f"{arch}/{case}"] = {
                "measured_ns": total_m, "predicted_ns": total_p, "error": total_p / total_m - 1,
                "fallback_share_of_predicted": fallback / total_p,
                "families": {f: {"measured_ns": measured[f], "predicted_ns": predicted[f],
                                 "share_of_measured": measured[f] / total_m}
                             for f in measured}}
    return cases
