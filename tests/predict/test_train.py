"""Training on a small committed profile (a subset of the measured H200 profile)."""

from __future__ import annotations

import lightgbm as lgb
import pytest

from revati.predict import report as report_mod
from revati.predict.features import spec_keys
from revati.predict.train import train

from .conftest import SMALL_PROFILE


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("models")
    return out, train(SMALL_PROFILE, out, folds=3, rounds=60)


def test_index_lists_spec_models_patterns_and_vocabulary(trained):
    out, _ = trained
    lines = (out / "index.txt").read_text().splitlines()
    assert {ln.split()[1] for ln in lines if ln.startswith("spec ")} == set(spec_keys())
    models = {ln.split()[1]: ln.split() for ln in lines if ln.startswith("model ")}
    assert models["gemm"][2:] == ["1", "12", "gemm.txt"]
    assert models["attention_shape"][2:4] == ["100", "10"]
    assert models["attention_mix"][2:4] == ["102", "15"]  # the profile's mixed calls
    assert "family collective 4" in lines  # no data: the roofline predicts it
    assert any(ln.startswith("pattern attention ") for ln in lines)
    assert any(ln.startswith("kernel attention_shape 0 ") for ln in lines)
    # the families predicted by shape elsewhere are marked, so runs can count their time
    assert {ln.split()[1] for ln in lines if ln.startswith("launch_only ")} == {
        "attention", "gemm_kernel", "moe_kernel"}
    for name, fields in models.items():
        booster = lgb.Booster(model_file=str(out / fields[4]))
        assert booster.num_feature() == int(fields[3]), name


def test_held_out_accuracy_on_real_measurements(trained):
    _, report = trained
    fams = report["families"]
    assert fams["gemm"]["source"] == "model" and fams["gemm"]["samples"] > 50
    assert fams["gemm"]["weighted_mape"] < 0.10
    assert fams["attention_shape"]["weighted_mape"] < 0.15
    groups = report["groups"]
    assert groups["gemm"]["weighted_mape"] == fams["gemm"]["weighted_mape"]
    # the mean over three fold draws, which differ (the points fall in other folds)
    draws = fams["gemm"]["draws_weighted_mape"]
    assert len(draws) == report["repeats"] == 3 and len(set(draws)) == 3
    assert fams["gemm"]["weighted_mape"] == pytest.approx(sum(draws) / 3)
    assert groups["others"]["samples"] == sum(fams[f]["samples"] for f in
                                              groups["others"]["families"]
                                              if fams[f]["source"] == "model")
    # the mixed-step model: the attention kernels of the 300 mixed calls (main, prepare, combine)
    mix = fams["attention_mix"]
    assert mix["source"] == "model" and mix["samples"] > 300 and mix["kernels"] >= 2
    assert groups["mixed attn"]["weighted_mape"] == mix["weighted_mape"]
    # the models must beat the roofline they correct
    for name in ("gemm", "attention_shape", "attention_mix"):
        assert fams[name]["weighted_mape"] < fams[name]["roofline"]["weighted_mape"]


def test_e2e_check_and_report(trained):
    _, report = trained
    cases = report["e2e"]
    assert set(cases) == {"llama-3.1-8b/prefill_2048", "llama-3.1-8b/decode_b64_kv1024",
                          "llama-3.1-8b/decode_b64_kv8192"}
    for case in cases.values():
        assert abs(case["error"]) < 0.25
        assert 0.0 <= case["fallback_share_of_predicted"] < 1.0
    text = report_mod.render(report)
    assert "gemm" in text and "decode_b64_kv8192" in text


def test_a_linear_base_extrapolates_up_but_not_below_its_rows():
    """A line fitted on sizes 2^10..2^20 predicts beyond 2^20 along the line, and a size
    below 2^10 (a kernel that got another argument there) as 2^10, not further down."""
    import numpy as np
    import pandas as pd

    from revati.predict.train import LINEAR_BASE, FamilyData, base_log, fit_base

    names = ["kernel_id", *LINEAR_BASE]
    size = np.arange(10, 21, dtype=float)
    X = np.column_stack([np.full(len(size), np.nan), size, size + 7, size, size + 8])
    rows = pd.DataFrame({"duration_ns": 1000 * 2.0 ** (size - 10)})
    base = fit_base(FamilyData(rows, X, names, []), np.ones(len(size), dtype=bool))
    probe = np.array([[np.nan, s, s + 7, s, s + 8] for s in (24.0, 10.0, 3.0)])
    up, low, below = np.exp(base_log(probe, base, names))
    assert up == pytest.approx(1000 * 2.0 ** 14, rel=0.02)
    assert low == pytest.approx(1000, rel=0.02) and below == pytest.approx(low)
    # a feature no fitted row had sets no bound: a launch that has it is not pushed to infinity
    X[:, 3] = np.nan
    base = fit_base(FamilyData(rows, X, names, []), np.ones(len(size), dtype=bool))
    assert np.isfinite(np.exp(base_log(probe, base, names))).all()
