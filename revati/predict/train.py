"""`revati predictor train`: one LightGBM model per kernel family from a hardware profile.

Target: log(measured / base). The base is the roofline, the C predictor's own (features.py), so a
model learns the efficiency the roofline misses and stays sane outside the profiled range; or,
for a family of kernel launches where cross-validation finds it better, a least-squares line in
the log size features (LINEAR_BASE): trees predict a constant beyond the largest shapes they
saw, and where the roofline's thread count is a poor measure of work (a norm's 32 threads per
row of any width) that constant is wrong by the family's whole size trend.
Evaluation: grouped k-fold cross-validation over sweep points (all rows of a point in one fold,
so no shape is seen in training and testing; every point held out once), repeated over several
random fold draws (REPEATS) and averaged: one draw's figure moves by a few points with the
luck of which points share a fold (misc 9.3-10.2 %, softmax 7.9-11.3 % over four seeds), the
mean of several is the steadier estimate. Each family draws from its own stream, so rows added
to one family leave the others' figures as they were. MAPE plain and GPU-time weighted, p90
absolute % error. The shipped model is then refitted on every point with the same settings.

Writes, into the models folder: <family>.txt (LightGBM text format), index.txt (what the C
predictor loads: the spec trained against, models, kernel-name patterns, kernel vocabulary;
grammar in docs/predictor.md) and report.json (report.py prints it).
"""

from __future__ import annotations

import datetime
import json
import zlib
from dataclasses import dataclass
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd

from revati.predict.families import (
    ATTENTION_MIX,
    ATTENTION_SHAPE,
    BY_NAME,
    FAMILIES,
    MOE_SHAPE,
    Family,
    family_of,
    match_order,
)
from revati.predict.features import (
    ATTENTION_MIX_OP,
    ATTENTION_SHAPE_OP,
    MOE_SHAPE_OP,
    Op,
    attention_feature_matrix,
    attention_mix_feature_matrix,
    feature_matrix,
    feature_names,
    is_mixed,
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
REPEATS = 3  # fold draws averaged (each costs a full cross-validation: ~30 s here)
# Kernel features a linear base may use (sizes, log scale), and its ridge penalty per row: the
# base only has to carry the trend, the trees fit the rest.
LINEAR_BASE = ("log_roofline_ns", "log2_blocks_arg_max", "log2_arg_max", "log2_threads")
RIDGE = 1e-3
KERNEL_LINE_ROWS = 30  # a kernel's own line from this many rows on (fewer: 10 overfitted a sort)
# kernel_id (-1: the family) -> intercept, a coefficient a feature, a lower bound a feature
Base = dict[int, np.ndarray]
# The targets by group (held-out, GPU-time weighted). Launch-only families are left
# out: the emulator predicts their kernels by shape, by cuBLAS call and by routing (the
# fused-MoE GEMMs count as GEMMs), and reports the GPU time they predicted in every run.
GROUPS = {"gemm": (("gemm", "moe"), 0.05), "attention": (("attention_shape",), 0.08),
          "mixed attn": (("attention_mix",), 0.08),
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
    if op in (Op.KERNEL, ATTENTION_SHAPE_OP, ATTENTION_MIX_OP):
        vocab = sorted(rows.kernel.unique()) if vocab is None else vocab
        index = {name: i for i, name in enumerate(vocab)}
        ids = [index.get(name, -1) for name in rows.kernel]
    else:
        vocab, ids = [], None
    records = rows.to_dict("records")
    if op == ATTENTION_SHAPE_OP:
        X = attention_feature_matrix(records, spec_vector, ids)
    elif op == ATTENTION_MIX_OP:
        X = attention_mix_feature_matrix(records, spec_vector, ids)
    elif op == MOE_SHAPE_OP:
        X = moe_feature_matrix(records, spec_vector)
    else:
        X = feature_matrix(records, spec_vector, ids)
    names = feature_names(op)
    assert names[-1] == "log_roofline_ns", names  # the target's base, see module doc
    return FamilyData(rows, X, names, vocab)


def mixed_rows(table: pd.DataFrame | None) -> pd.DataFrame:
    """The attention_mix model's rows: the attention kernels of the profile's mixed calls.
    A call timed again in another run keeps its point, so cross-validation never trains on one
    timing of a call and tests on another."""
    if table is None:
        return pd.DataFrame()
    rows = table[assign_families(table) == "attention"]
    rows = rows[[is_mixed(r) for r in rows.to_dict("records")]]
    call = (rows.q_lens.map(tuple).astype(str) + rows.kv_lens.map(tuple).astype(str)
            + rows.heads.astype(str) + "/" + rows.kv_heads.astype(str))
    return rows.assign(point=pd.factorize(call)[0])


def _ridge(D: np.ndarray, y: np.ndarray) -> np.ndarray:
    penalty = RIDGE * len(y) * np.eye(D.shape[1])
    penalty[0, 0] = 0.0  # the intercept is free
    return np.linalg.solve(D.T @ D + penalty, D.T @ y)


def fit_base(data: FamilyData, mask: np.ndarray) -> Base:
    """Linear bases on the rows in mask: the family's line (key -1) and, where the family has
    kernel ids, one line per kernel with at least KERNEL_LINE_ROWS rows (a norm and a sort
    scale differently with their sizes). Each line: intercept, one coefficient per feature
    (zero outside LINEAR_BASE), then one lower bound per feature: the smallest value the line
    was fitted on. A line extrapolates upwards, past the largest shapes swept, which is what it
    is for; below its rows a feature counts as its smallest value, because a kernel whose
    size arguments vary in meaning (a radix sort pass that gets a bit offset, not the item
    count) would otherwise be predicted several times off. Missing features count 0, as in
    predict/models.c (evaluate)."""
    cols = np.array([data.names.index(c) for c in LINEAR_BASE])
    D = np.column_stack([np.ones(len(data.X)), np.nan_to_num(data.X[:, cols])])
    y = np.log(data.rows.duration_ns.to_numpy(dtype=float))
    groups = {-1: mask}
    if "kernel_id" in data.names:
        kid = data.X[:, data.names.index("kernel_id")]
        for k in np.unique(kid[mask & ~np.isnan(kid)]):
            if (mask & (kid == k)).sum() >= KERNEL_LINE_ROWS:
                groups[int(k)] = mask & (kid == k)
    base: Base = {}
    n = len(data.names)
    for key, rows in groups.items():
        line = _ridge(D[rows], y[rows])
        coef = np.concatenate([np.zeros(n + 1), np.full(n, -np.inf)])
        coef[0], coef[1 + cols] = line[0], line[1:]
        seen = data.X[rows][:, cols]
        # a feature no row had (all missing) gets no bound: launches that have it go by the line
        coef[1 + n + cols] = np.where(np.isnan(seen).all(axis=0), -np.inf,
                                      np.nanmin(np.where(np.isnan(seen), np.inf, seen), axis=0))
        base[key] = coef
    return base


def base_log(X: np.ndarray, base: Base | None, names: list[str]) -> np.ndarray:
    """log ns of the base: the roofline (the last feature) when base is None, else each
    row's kernel line or the family's."""
    if base is None:
        return X[:, -1]
    kid = X[:, names.index("kernel_id")] if "kernel_id" in names else np.full(len(X), np.nan)
    n = len(names)

    def line(coef: np.ndarray, rows: np.ndarray) -> np.ndarray:
        x = np.where(np.isnan(X[rows]), 0.0, np.maximum(X[rows], coef[1 + n:]))
        return coef[0] + x @ coef[1:1 + n]

    out = line(base[-1], np.ones(len(X), dtype=bool))
    for k, coef in base.items():
        rows = kid == k
        out[rows] = line(coef, rows)
    return out


def _fit(data: FamilyData, mask: np.ndarray, seed: int, rounds: int,
         base: Base | None = None) -> lgb.Booster:
    y = np.log(data.rows.duration_ns.to_numpy(dtype=float)) - base_log(data.X, base, data.names)
    cat = ["kernel_id"] if "kernel_id" in data.names else []
    ds = lgb.Dataset(data.X[mask], y[mask], feature_name=data.names, categorical_feature=cat,
                     free_raw_data=False)
    return lgb.train({**PARAMS, "seed": seed}, ds, num_boost_round=rounds)


def predict_ns(booster: lgb.Booster, X: np.ndarray, names: list[str],
               base: Base | None = None) -> np.ndarray:
    return np.exp(booster.predict(X) + base_log(X, base, names))


def cross_validate(data: FamilyData, fold: np.ndarray, seed: int, rounds: int,
                   linear: bool) -> np.ndarray:
    """Out-of-fold predictions: each fold predicted by models fitted on the others."""
    pred = np.empty(len(data.rows))
    for f in np.unique(fold):
        held, train_mask = fold == f, fold != f
        base = fit_base(data, train_mask) if linear else None
        pred[held] = predict_ns(_fit(data, train_mask, seed, rounds, base), data.X[held],
                                data.names, base)
    return pred


def errors(pred: np.ndarray, true: np.ndarray) -> dict[str, float]:
    ape = np.abs(pred - true) / true
    return {"mape": float(ape.mean()),
            "weighted_mape": float(np.abs(pred - true).sum() / true.sum()),
            "p90_ape": float(np.quantile(ape, 0.9))}


def mean_errors(preds: list[np.ndarray], true: np.ndarray) -> dict[str, object]:
    """errors() averaged over fold draws, with each draw's weighted MAPE (their spread)."""
    each = [errors(p, true) for p in preds]
    out: dict[str, object] = {k: float(np.mean([e[k] for e in each])) for k in each[0]}
    out["draws_weighted_mape"] = [e["weighted_mape"] for e in each]
    return out


def fold_draw(rng: np.random.Generator, points: pd.Series, folds: int) -> np.ndarray:
    """A random grouped k-fold: every sweep point in one fold, with all its rows, so the errors
    cover the whole family rather than one lucky or unlucky draw."""
    unique = points.unique()
    fold_of = dict(zip(rng.permutation(unique), np.arange(len(unique)) % folds, strict=True))
    return points.map(fold_of).to_numpy()


def train(profile_dir: str | Path, out_dir: str | Path, folds: int = 5,
          seed: int = 0, rounds: int = ROUNDS, repeats: int = REPEATS) -> dict[str, object]:
    profile = read_profile(profile_dir)
    spec = profile.spec.vector()
    df = profile.launches.copy()
    df["family"] = assign_families(df)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, object] = {
        "hardware": profile.spec.name, "profile": str(profile_dir),
        "profile_provenance": {k: profile.provenance.get(k) for k in
                               ("gpu", "driver", "cuda", "torch", "date", "command")},
        "trained": datetime.datetime.now(datetime.UTC).isoformat(),
        "folds": folds, "repeats": repeats, "seed": seed, "rounds": rounds, "families": {}}
    index = ["# revati predictor index (revati predictor train); grammar: docs/predictor.md"]
    index += [f"spec {k} {v:.17g}" for k, v in profile.spec.values.items()]
    vocab_lines, base_lines, models = [], [], {}
    oof: dict[str, tuple[list[np.ndarray], np.ndarray]] = {}  # per draw out-of-fold, measured
    attention = df[(df.family == "attention") & (df.attn_batch > 0)]
    moe = df[(df.family == "moe_kernel") & (df.moe_experts > 0)]
    groups: list[tuple[Family, pd.DataFrame]] = [(f, df[df.family == f.name]) for f in FAMILIES]
    by_shape = [(ATTENTION_SHAPE, attention), (MOE_SHAPE, moe),
                (ATTENTION_MIX, mixed_rows(profile.mixed_attention))]
    for fam, rows in [*groups, *by_shape]:
        by_launch = fam.op in {o.value for o in Op}
        entry: dict[str, object] = {"op": Op(fam.op).name.lower() if by_launch else fam.name,
                                    "samples": len(rows),
                                    "target_mape": fam.target_mape}
        if len(rows) < MIN_ROWS:
            entry["source"] = "roofline"
            index.append(f"family {fam.name} {int(fam.op)}")
            report["families"][fam.name] = entry
            continue
        data = family_data(rows, fam.name, spec)
        # each family's own stream: new rows of one family leave the others' draws as they were
        rng = np.random.default_rng([seed, zlib.crc32(fam.name.encode())])
        draws = [fold_draw(rng, rows.point, folds) for _ in range(repeats)]
        true = rows.duration_ns.to_numpy(dtype=float)
        preds = [cross_validate(data, fold, seed, rounds, linear=False) for fold in draws]
        if set(LINEAR_BASE) <= set(data.names):
            lines = [cross_validate(data, fold, seed, rounds, linear=True) for fold in draws]
            entry["roofline_base"] = mean_errors(preds, true)
            entry["linear_base"] = mean_errors(lines, true)
            linear = (entry["linear_base"]["weighted_mape"]
                      < entry["roofline_base"]["weighted_mape"])
            preds = lines if linear else preds
        else:
            linear = False
        entry.update(mean_errors(preds, true), base="linear" if linear else "roofline")
        oof[fam.name] = (preds, true)
        entry["roofline"] = errors(np.exp(data.X[:, -1]), true)
        entry.update(source="model", gpu_time_ns=float(true.sum()), kernels=len(data.vocab))
        mask = np.ones(len(rows), dtype=bool)
        base = fit_base(data, mask) if linear else None
        full = _fit(data, mask, seed, rounds, base)
        full.save_model(str(out / f"{fam.name}.txt"))
        models[fam.name] = (full, data.vocab, base)
        index.append(f"model {fam.name} {int(fam.op)} {len(data.names)} {fam.name}.txt")
        for kernel_id, coef in (base or {}).items():
            base_lines.append(f"base {fam.name} {kernel_id} "
                              + " ".join(f"{c:.17g}" for c in coef))
        vocab_lines += [f"kernel {fam.name} {i} {name}" for i, name in enumerate(data.vocab)]
        report["families"][fam.name] = entry
    index += [f"pattern {fam} {p}" for p, fam in match_order()]
    index += [f"launch_only {f.name}" for f in FAMILIES if f.launch_only]
    index += base_lines + vocab_lines
    (out / "index.txt").write_text("\n".join(index) + "\n")
    report["groups"] = {}
    for group, (members, target) in GROUPS.items():
        have = [oof[m] for m in members if m in oof]
        if have:
            true = np.concatenate([t for _, t in have])
            preds = [np.concatenate([p[d] for p, _ in have]) for d in range(repeats)]
            report["groups"][group] = {**mean_errors(preds, true), "samples": len(true),
                                       "target_mape": target, "families": list(members)}
    if profile.e2e_kernels is not None:
        report["e2e"] = e2e_check(profile, models, spec)
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


Models = dict[str, tuple[lgb.Booster, list[str], Base | None]]  # booster, vocab, base


def e2e_check(profile: HardwareProfile, models: Models,
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
        for case, (b, q_len, kv_len) in e2e.CASES.items():
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
                    booster, vocab, base = models[fam]
                    data = family_data(sub, fam, spec, vocab)
                    predicted[fam] = float(predict_ns(booster, data.X, data.names, base).sum())
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
