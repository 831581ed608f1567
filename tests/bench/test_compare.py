"""`revati validate`'s comparison logic (the emulated run itself is covered by the e2e tests)."""

from __future__ import annotations

import gzip
import json

import pytest

from revati.bench.compare import compare, read_result, recorded_requests, render
from revati.bench.errors import BenchError
from revati.workload.datasets import Request


def test_requests_and_send_times_are_recovered_from_a_detailed_result() -> None:
    real = {"input_lens": [128, 90, 300], "output_lens": [512, 7, 20],
            "start_times": [100.25, 100.5, 103.0], "request_rate": 4.0}
    assert recorded_requests(real) == [Request(0.0, 128, 512), Request(0.25, 90, 7),
                                       Request(2.75, 300, 20)]


def test_a_gzipped_result_reads_as_the_plain_one(tmp_path) -> None:
    real = {"input_lens": [128], "output_lens": [512], "start_times": [1.0]}
    (tmp_path / "r.json").write_text(json.dumps(real))
    (tmp_path / "r.json.gz").write_bytes(gzip.compress(json.dumps(real).encode()))
    assert read_result(tmp_path / "r.json.gz") == read_result(tmp_path / "r.json") == real


@pytest.mark.parametrize(("name", "content", "message"), [
    ("missing.json", None, "No such file or directory"),
    ("list.json", b"[1]", "not a `vllm bench serve` result"),
    ("text.json", b"xx", "not a `vllm bench serve` result (Expecting value"),
    ("plain.json.gz", b"{}", "not a `vllm bench serve` result (Not a gzipped file"),
])
def test_a_real_result_that_cannot_be_read_is_one_line_naming_it(tmp_path, name, content,
                                                                  message) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(BenchError) as e:
        read_result(path)
    assert str(e.value).startswith(f"--real {path}: ") and message in str(e.value)


def test_a_result_without_details_is_refused() -> None:
    with pytest.raises(BenchError, match="--save-detailed"):
        recorded_requests({"mean_ttft_ms": 1.0})
    with pytest.raises(BenchError, match="--save-detailed"):
        recorded_requests({"input_lens": [100, 120], "output_lens": [5, 5]})


def test_comparison_covers_every_shared_metric_with_its_error() -> None:
    real = {"mean_ttft_ms": 20.0, "mean_tpot_ms": 5.0, "p90_itl_ms": 4.0, "completed": 10,
            "model_id": "x", "only_real": 1.0}
    emulated = {"mean_ttft_ms": 21.0, "mean_tpot_ms": 4.5, "p90_itl_ms": 4.0, "completed": 10,
                "model_id": "x", "wall_s": 3.0}
    rows = {r["metric"]: r for r in compare(real, emulated)}
    assert set(rows) == {"mean_ttft_ms", "mean_tpot_ms", "p90_itl_ms"}
    assert rows["mean_ttft_ms"]["rel_error"] == pytest.approx(0.05)
    assert rows["mean_tpot_ms"]["rel_error"] == pytest.approx(-0.1)
    assert "| mean_ttft_ms | 20.00 | 21.00 | +5.0 % |" in render(list(rows.values()))


def test_a_percentile_row_says_how_many_emulated_samples_lie_at_or_below_the_real_one() -> None:
    """ITLs cluster by the kind of step; a p99 between two clusters reads far off for a few
    samples more or fewer in the upper one, which the share shows."""
    real = {"p99_itl_ms": 84.0, "p50_ttft_ms": 30.0, "p99_tpot_ms": 9.0, "mean_itl_ms": 8.0}
    itls = [[0.007] * 98 + [0.05], [0.095]]        # 100 gaps: 98 decode, one 50 ms, one 95 ms
    detailed = {"itls": itls, "ttfts": [0.02, 0.03, 0.04, 0.05]}
    emulated = {"p99_itl_ms": 50.5, "p50_ttft_ms": 35.0, "p99_tpot_ms": 9.0, "mean_itl_ms": 8.1}
    rows = {r["metric"]: r for r in compare(real, emulated, detailed)}
    assert rows["p99_itl_ms"]["rel_error"] == pytest.approx(50.5 / 84 - 1)
    assert rows["p99_itl_ms"]["emulated_share"] == pytest.approx(0.99)
    assert rows["p50_ttft_ms"]["emulated_share"] == pytest.approx(0.5)
    # no samples behind TPOT percentiles or means in a detailed result: no share
    assert "emulated_share" not in rows["p99_tpot_ms"]
    assert "emulated_share" not in rows["mean_itl_ms"]
    assert "| p99_itl_ms | 84.00 | 50.50 | -39.9 % | 99.0 % |" in render(list(rows.values()))
    assert "emulated_share" not in compare(real, emulated)[0]
