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


def test_a_variant_may_run_its_own_engine_release():
    """#29: 'new=--engine vllm==0.33.0 FLAGS' runs that release with those flags."""
    v = parse_variant("new=--engine vllm==0.33.0 --max-num-seqs 64")
    assert (v.engine, v.engine_args) == ("vllm==0.33.0", ("--max-num-seqs", "64"))
    assert parse_variant("new=--engine=vllm==0.33.0").engine == "vllm==0.33.0"
    assert parse_variant("old=--max-num-seqs 64").engine is None
    with pytest.raises(ValueError, match="needs a release"):
        parse_variant("new=--engine")


def _runs(ttft: list[float], tput: list[float], release: str = "vllm==0.26.0") -> list[dict]:
    return [{"mean_ttft_ms": t, "output_throughput": p, "revati": {"release": release}}
            for t, p in zip(ttft, tput, strict=True)]


def test_differences_within_the_spread_say_so():
    runs = {"a": _runs([10.0, 11.0, 12.0], [100.0, 101.0, 102.0]),
            "b": _runs([20.0, 21.0, 22.0], [101.5, 102.0, 103.0], "vllm==0.33.0")}
    text, rows = table(runs)
    ttft = rows["mean_ttft_ms"]["vs_a"]["b"]
    assert ttft["delta_pct"] == pytest.approx(100 * (21 / 11 - 1))
    assert not ttft["within_spread"]  # 20-22 ms against 10-12 ms
    tput = rows["output_throughput"]["vs_a"]["b"]
    assert tput["within_spread"]  # 101.5-103 overlaps 100-102
    assert "(within spread)" in text and "| mean TTFT ms | 11 [10-12] | 21 [20-22] |" in text
    assert "mean_tpot_ms" not in rows  # a metric the runs lack is left out
    assert "| engine release | vllm==0.26.0 | vllm==0.33.0 |" in text
