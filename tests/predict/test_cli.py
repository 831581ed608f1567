"""`revati predictor report` on the shipped H200 models, `revati predictor e2e`'s comparison,
and `revati profile merge`."""

from __future__ import annotations

from revati.cli.main import main
from revati.predict.hwprofile import read_profile

from .conftest import SMALL_PROFILE


def test_report_prints_every_family_and_the_e2e_cases(capsys):
    assert main(["predictor", "report", "--hardware", "h200"]) == 0
    out = capsys.readouterr().out
    for needle in ("gemm ", "attention_shape", "elementwise", "MAPE", "p90",
                   "prefill_2048", "decode_b64_kv8192"):
        assert needle in out


def test_merge_keeps_points_distinct(tmp_path):
    out = tmp_path / "merged"
    assert main(["profile", "merge", "--out", str(out), str(SMALL_PROFILE),
                 str(SMALL_PROFILE)]) == 0
    small, merged = read_profile(SMALL_PROFILE), read_profile(out)
    assert len(merged.launches) == 2 * len(small.launches)
    assert merged.launches.point.nunique() == 2 * small.launches.point.nunique()
    # peaks come from the datasheet; the launch overhead is re-derived from the merged rows
    assert merged.spec.name == small.spec.name
    assert merged.spec.values["peak_flops.bf16"] == small.spec.values["peak_flops.bf16"]
    assert merged.measured["min_kernel_ns"] == small.launches[small.launches.op == 0]\
        .duration_ns.min()


def test_report_shows_the_emulated_e2e_check(capsys):
    assert main(["predictor", "report", "--hardware", "h200"]) == 0
    out = capsys.readouterr().out
    assert "end-to-end on the emulated GPU" in out and "decode KV 8192 / 1024" in out


def test_emulated_e2e_is_compared_with_the_measured_forwards(tmp_path):
    import json

    from revati.predict.emulated_e2e import compare, render

    cases = {"prefill_2048": 50e6, "decode_b64_kv1024": 8e6, "decode_b64_kv8192": 20e6}
    (tmp_path / "e2e_toy.json").write_text(json.dumps(
        {"cases": {c: {"gpu_time_ns": v} for c, v in cases.items()}}))
    emulated = {"toy": {"prefill_2048": {"gpu_time_ns": 55e6, "roofline_share": 0.0},
                        "decode_b64_kv1024": {"gpu_time_ns": 8e6, "roofline_share": 0.0},
                        "decode_b64_kv8192": {"gpu_time_ns": 24e6, "roofline_share": 0.1}}}
    result = compare(tmp_path, emulated)
    assert abs(result["toy"]["cases"]["prefill_2048"]["error"] - 0.1) < 1e-12
    ratio = result["toy"]["decode_kv8192_over_kv1024"]
    assert (ratio["measured"], ratio["emulated"]) == (2.5, 3.0)
    assert abs(ratio["error"] - 0.2) < 1e-12
    assert "+10.0%" in render(result) and "+20.0%" in render(result)
