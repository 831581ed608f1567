"""`revati compare`'s parts that need no engine: variants from the command line, and the
table of medians, ranges and differences."""

import pytest

from revati.bench.variants import parse_variant, table


def test_a_variant_is_a_name_and_shell_quoted_engine_flags():
    v = parse_variant("seqs64=--max-num-seqs 64 --served-model-name 'a b'")
    assert v.name == "seqs64"
    assert v.engine_args == ("--max-num-seqs", "64", "--served-model-name", "a b")
    assert parse_variant("default=").engine_args == ()
    with pytest.raises(ValueError, match="NAME=FLAGS"):
        parse_variant("--max-num-seqs 64")


def _runs(ttft: list[float], tput: list[float]) -> list[dict]:
    return [{"mean_ttft_ms": t, "output_throughput": p} for t, p in zip(ttft, tput, strict=True)]


def test_differences_within_the_spread_say_so():
    runs = {"a": _runs([10.0, 11.0, 12.0], [100.0, 101.0, 102.0]),
            "b": _runs([20.0, 21.0, 22.0], [101.5, 102.0, 103.0])}
    text, rows = table(runs)
    ttft = rows["mean_ttft_ms"]["vs_a"]["b"]
    assert ttft["delta_pct"] == pytest.approx(100 * (21 / 11 - 1))
    assert not ttft["within_spread"]  # 20-22 ms against 10-12 ms
    tput = rows["output_throughput"]["vs_a"]["b"]
    assert tput["within_spread"]  # 101.5-103 overlaps 100-102
    assert "(within spread)" in text and "| mean TTFT ms | 11 [10-12] | 21 [20-22] |" in text
    assert "mean_tpot_ms" not in rows  # a metric the runs lack is left out
