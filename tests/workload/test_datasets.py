"""Workload files: the shipped ShareGPT distribution, trace loading, vLLM timed_trace output."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from revati.bench.checks import check_requests
from revati.bench.errors import BenchError
from revati.bench.load import load_args
from revati.bench.options import BenchOptions
from revati.workload import datasets
from revati.workload.datasets import DatasetError, Request


def test_sharegpt_draws_are_seeded_and_follow_the_shipped_distribution() -> None:
    a = datasets.sharegpt(2000, seed=1)
    assert a == datasets.sharegpt(2000, seed=1) != datasets.sharegpt(2000, seed=2)
    # the distribution's mean input is 2,340 tokens and mean output 439 (data/README.md)
    assert statistics.mean(r.input_len for r in a) == pytest.approx(2340, rel=0.05)
    assert statistics.mean(r.output_len for r in a) == pytest.approx(439, rel=0.05)
    assert max(r.input_len + r.output_len for r in a) > 4096


def test_sharegpt_draws_only_what_fits_the_context() -> None:
    short = datasets.sharegpt(2000, seed=1, max_len=2048)
    assert max(r.input_len + r.output_len for r in short) <= 2048


def test_a_csv_trace_in_vidur_columns_is_sorted_and_made_relative(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n"
                     "12.5,100,7\n10.0,50,3\n11.0,70,5\n")
    assert datasets.load_trace(trace) == [Request(0.0, 50, 3), Request(1.0, 70, 5),
                                          Request(2.5, 100, 7)]


def test_a_jsonl_trace_keeps_its_hash_ids(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 3, "input_length": 20, "output_length": 2, '
                     '"hash_ids": [7, 8]}\n\n{"timestamp": 4, "input_len": 5, "output_len": 1}\n')
    reqs = datasets.load_trace(trace)
    assert reqs == [Request(0.0, 20, 2, (7, 8)), Request(1.0, 5, 1)]
    out = datasets.write_timed_trace(reqs, tmp_path / "out.jsonl")
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0] == {"timestamp": 0.0, "input_length": 20, "output_length": 2,
                        "hash_ids": [7, 8]}
    assert lines[1]["hash_ids"] == [9]  # fresh ids never collide with the trace's own


def test_timed_trace_gives_every_request_its_own_blocks(tmp_path: Path) -> None:
    out = datasets.write_timed_trace([Request(0, 33, 1), Request(0.5, 16, 1)],
                                     tmp_path / "o.jsonl")
    a, b = (json.loads(x)["hash_ids"] for x in out.read_text().splitlines())
    assert len(a) == 3 and len(b) == 1 and not set(a) & set(b)


@pytest.mark.parametrize("content,message", [
    ("timestamp,input_length\n0,5\n", "no output_length field"),
    ("timestamp,input_length,output_length\n0,five,1\n", "t.csv:2: not a number"),
    ("timestamp,input_length,output_length\n0,0,1\n", "must be at least 1"),
    ("timestamp,input_length,output_length\n", "has no requests"),
])
def test_bad_traces_are_refused_with_the_line(tmp_path: Path, content: str, message: str) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(content)
    with pytest.raises(DatasetError, match=message):
        datasets.load_trace(trace)


def test_missing_trace_and_too_few_hash_ids(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        datasets.load_trace(tmp_path / "nope.csv")
    with pytest.raises(DatasetError, match="40 input tokens has 2 hash_ids"):
        datasets.write_timed_trace([Request(0, 40, 1, (1, 2))], tmp_path / "o.jsonl")


def test_load_arguments_for_each_dataset(tmp_path: Path) -> None:
    opts = BenchOptions(model="m", hardware="h", out=tmp_path, num_prompts=3, seed=4,
                        request_rate=2.0, burstiness=float("inf"))
    assert load_args(opts, tmp_path, None)["dataset-name"] == "random"
    opts.dataset = "sharegpt"
    args = load_args(opts, tmp_path, 4096)
    assert args["dataset-name"] == "timed_trace" and "no-self-timed" in args
    assert (args["request-rate"], args["burstiness"]) == ("2.0", "inf")
    assert len((tmp_path / "dataset.jsonl").read_text().splitlines()) == 3
    opts.dataset, opts.num_prompts = "trace", None
    with pytest.raises(BenchError, match="--trace FILE"):   # checked before any load runs
        check_requests(opts, 4096, "--max-model-len")
    opts.trace = tmp_path / "t.csv"
    opts.trace.write_text("timestamp,input_length,output_length\n0,5,1\n1,6,2\n")
    args = load_args(opts, tmp_path, None)
    assert "self-timed" in args and "request-rate" not in args and args["num-prompts"] == "2"
