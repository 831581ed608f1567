"""`revati predictor report` on the shipped H200 models, and `revati profile merge`."""

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
