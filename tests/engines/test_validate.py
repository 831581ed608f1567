"""`revati validate`'s comparison logic (the emulated run itself is covered by the e2e tests)."""

from __future__ import annotations

import pytest

from revati.workload.bench import BenchError
from revati.workload.validate import compare, render, workload_of


def test_workload_is_recovered_from_a_detailed_result() -> None:
    real = {"input_lens": [128] * 5, "output_lens": [512] * 5, "request_rate": 4.0,
            "burstiness": 1.0, "max_concurrency": None}
    assert workload_of(real, seed=3) == {"input_len": 128, "output_len": 512, "num_prompts": 5,
                                         "request_rate": 4.0, "burstiness": 1.0,
                                         "max_concurrency": None, "seed": 3}
    assert workload_of({**real, "request_rate": "inf"}, 0)["request_rate"] == float("inf")


def test_a_result_without_details_or_with_ranged_lengths_is_refused() -> None:
    with pytest.raises(BenchError, match="--save-detailed"):
        workload_of({"mean_ttft_ms": 1.0}, 0)
    with pytest.raises(BenchError, match="ranged lengths"):
        workload_of({"input_lens": [100, 120], "output_lens": [5, 5]}, 0)


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
