"""Engine flag mapping: config values become the engine's own command-line flags."""

import pytest
from omegaconf import open_dict

from revati.tune.engine_flags import engine_flags, unmapped_keys
from revati.tune.errors import ConfigError


def _value(args, flag):
    return args[args.index(flag) + 1]


def test_vllm_flags(make_cfg):
    args = engine_flags(make_cfg("+model=llama8b", "scheduler.max_num_seqs=64",
                                 "scheduler.enable_chunked_prefill=false",
                                 "engine.extra_args=[--enforce-eager]"))
    assert "--no-enable-chunked-prefill" in args and "--enable-chunked-prefill" not in args
    assert "--enable-prefix-caching" in args
    assert _value(args, "--max-num-seqs") == "64"
    assert _value(args, "--max-num-batched-tokens") == "8192"
    assert _value(args, "--gpu-memory-utilization") == "0.9"
    assert _value(args, "--scheduling-policy") == "fcfs"
    assert args[-1] == "--enforce-eager"  # extra args last, verbatim


def test_null_keeps_the_engine_default(make_cfg):
    args = engine_flags(make_cfg("+model=llama8b", "scheduler.max_num_seqs=null"))
    assert "--max-num-seqs" not in args


def test_sglang_flags(make_cfg):
    cfg = make_cfg("+model=llama8b", "engine=sglang", "engine.enable_prefix_caching=false")
    args = engine_flags(cfg)
    assert _value(args, "--max-running-requests") == "256"
    assert "--disable-radix-cache" in args
    assert unmapped_keys(cfg, {"scheduler.enable_chunked_prefill", "workload.request_rate"}) == [
        "scheduler.enable_chunked_prefill"]


def test_mapping_of_an_unknown_key_fails(make_cfg):
    cfg = make_cfg("+model=llama8b")
    with open_dict(cfg):
        cfg.engine.flags["scheduler.nope"] = {"flag": "--nope"}
    with pytest.raises(ConfigError, match="unknown key 'scheduler.nope'"):
        engine_flags(cfg)
