"""Trials that differ only in their load share one started engine (issue #28, item 1): the
second trial finds the prefix cache emptied and serves its load exactly; a trial that
changes an engine flag gets an engine of its own; nothing outlives the sweep's engines."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from revati.engines.common import http_get
from revati.tune.trial import SharedEngine, bench_options, engine_key, run_trial
from tests.timewarp.conftest import alive

ARGS = ("+model=llama3_8b", "workload.num_prompts=10", "workload.input_len=128",
        "workload.output_len=32", "workload.request_rate=10", "engine.max_model_len=4096")


def _trial(make_cfg, out: Path, *extra: str):
    cfg = make_cfg(*ARGS, *extra)
    OmegaConf.update(cfg, "trial.out_dir", str(out), force_add=True)
    return cfg


def test_the_engine_key_is_everything_but_the_load(make_cfg, tmp_path):
    base, _ = bench_options(_trial(make_cfg, tmp_path), tmp_path / "a")
    other_load, _ = bench_options(make_cfg("+model=llama3_8b", "engine.max_model_len=4096",
                                           "workload=sharegpt", "workload.request_rate=3",
                                           "seed=5"), tmp_path / "b")
    assert engine_key(base) == engine_key(other_load)
    for change in ({"tp": 2}, {"engine_args": [*base.engine_args, "--max-num-seqs", "64"]},
                   {"model": "qwen2_5_7b"}, {"engine": "sglang"}):
        assert engine_key(base) != engine_key(dataclasses.replace(base, **change)), change


def _prefix_cache_hits(port: int) -> float:
    body = http_get(port, "/metrics")
    assert body is not None
    return sum(float(m) for m in re.findall(
        r"^vllm:prefix_cache_hits_total\{[^}]*\} (\S+)$", body.decode(), re.M))


@pytest.mark.e2e
def test_trials_that_differ_in_their_load_share_one_engine(make_cfg, tmp_path):
    with SharedEngine() as engines:
        first = run_trial(_trial(make_cfg, tmp_path / "t0"), engines)
        server = engines.server
        assert server is not None
        hits = _prefix_cache_hits(server.port)
        # the same load and seed: the same prompts, which the first load left cached
        again = run_trial(_trial(make_cfg, tmp_path / "t1"), engines)
        hits_again = _prefix_cache_hits(server.port) - hits
        other = run_trial(_trial(make_cfg, tmp_path / "t2", "workload.request_rate=20",
                                 "seed=1"), engines)
        assert engines.started == 1 and engines.server is server
        pids = [server.pid]
    assert not [p for p in pids if p and alive(p)]
    assert [s["engine_shared"] for s in (first, again, other)] == [False, True, True]
    for s in (first, again, other):
        assert s["completed"] == 10 and s["failed"] == 0
        assert s["total_output_tokens"] == 10 * 32 and s["total_input_tokens"] == 10 * 128
        assert 0 < s["predictor_coverage"] <= 1  # over the trial's measured requests
    # emptied before the second load: it hits the cache no more than the first did on a
    # fresh engine (the readiness check's and warm-ups' shared prompt); left full, each of
    # its ten prompts would hit
    assert hits > 0 and hits_again <= hits
    assert (tmp_path / "t1" / "summary.json").is_file()
    assert "started for an earlier trial" in (tmp_path / "t1" / "bench.log").read_text()
