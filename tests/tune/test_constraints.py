"""Constraint checks prune exactly the configurations the engine would refuse."""

import pytest
from omegaconf import OmegaConf

from revati.tune.constraints import CONSTRAINTS, check_fixed, first_violation
from revati.tune.errors import ConfigError

ALL = tuple(CONSTRAINTS)


def _with(cfg, **values):
    for key, value in values.items():
        OmegaConf.update(cfg, key.replace("__", "."), value)
    return cfg


def test_llama70b_tp_pp_grid_on_h200(make_cfg):
    cfg, infeasible = make_cfg("+model=llama70b", "parallelism.host_cores=16"), {}
    for tp in (1, 2, 4, 8):
        for pp in (1, 2, 4):
            _with(cfg, parallelism__tensor_parallel_size=tp, parallelism__pipeline_parallel_size=pp)
            infeasible[tp, pp] = first_violation(cfg, ALL)
    # Over the 8-GPU budget, and 141 GB of bf16 weights on one 141 GB H200.
    assert {k for k, v in infeasible.items() if v} == {(4, 4), (8, 2), (8, 4), (1, 1)}
    assert "max_gpus=8" in infeasible[8, 4]
    assert "weights 131.4 GiB" in infeasible[1, 1]


def test_no_layout_is_ruled_out_for_cores_only_for_an_estimated_wall_time(make_cfg):
    """Issue #26: every layout runs on any number of cores (the clock rate corrects for
    contention); trial.max_wall_min skips those estimated to take longer, saying why."""
    from revati.timewarp.timekeeper import host_cores
    from revati.tune.walltime import estimate_wall_s

    cfg = make_cfg()
    assert cfg.parallelism.host_cores == host_cores()
    _with(cfg, parallelism__host_cores=2, parallelism__tensor_parallel_size=4,
          parallelism__pipeline_parallel_size=2)
    assert first_violation(cfg, ALL) is None
    eight = estimate_wall_s(cfg)
    _with(cfg, parallelism__tensor_parallel_size=1, parallelism__pipeline_parallel_size=1)
    one = estimate_wall_s(cfg)
    # 8 worker processes on 2 cores take longer than one engine; more cores, less time
    assert eight > 3 * one
    _with(cfg, parallelism__host_cores=16, parallelism__tensor_parallel_size=4,
          parallelism__pipeline_parallel_size=2)
    assert estimate_wall_s(cfg) < eight
    _with(cfg, parallelism__host_cores=2, trial__max_wall_min=eight / 60 / 2)
    reason = first_violation(cfg, ("wall_time",))
    assert "exceeds trial.max_wall_min" in reason and "8 emulated GPUs" in reason
    _with(cfg, parallelism__tensor_parallel_size=1, parallelism__pipeline_parallel_size=1)
    assert first_violation(cfg, ("wall_time",)) is None


def test_memory_depends_on_the_hardware(make_cfg):
    # Mixtral-8x7B: 87 GiB of bf16 weights fit one 141 GB H200 but not one 80 GB H100.
    assert first_violation(make_cfg("+model=mixtral"), ("fits_in_memory",)) is None
    cfg = make_cfg("+model=mixtral", hardware="h100_sxm")
    assert "weights 87.0 GiB" in first_violation(cfg, ("fits_in_memory",))
    cfg = _with(cfg, parallelism__tensor_parallel_size=2)
    assert first_violation(cfg, ("fits_in_memory",)) is None


@pytest.mark.parametrize("model,tp,fragment", [
    ("llama70b", 3, "does not divide num_attention_heads=64"),
    ("qwen7b", 8, "does not divide num_attention_heads=28"),   # 28 heads
    ("qwen7b", 7, "and num_key_value_heads=4 of qwen2_5_7b do not divide"),  # 7 | 28 heads
])
def test_tp_must_divide_heads(make_cfg, model, tp, fragment):
    cfg = _with(make_cfg(f"+model={model}"), parallelism__tensor_parallel_size=tp,
                parallelism__max_gpus=16)
    assert fragment in first_violation(cfg, ("tp_divides_heads",))


def test_tp_above_kv_heads_replicates(make_cfg):
    # Qwen2.5-7B has 4 KV heads; TP 4 splits them, and Qwen3-30B-A3B at TP 8 replicates.
    assert first_violation(_with(make_cfg("+model=qwen7b"), parallelism__tensor_parallel_size=4),
                           ("tp_divides_heads",)) is None
    cfg = _with(make_cfg("+model=qwen3_30b"), parallelism__tensor_parallel_size=8)
    assert first_violation(cfg, ("tp_divides_heads",)) is None


def test_pp_must_divide_layers(make_cfg):
    cfg = _with(make_cfg("+model=qwen7b"), parallelism__pipeline_parallel_size=8)  # 28 layers
    assert "num_hidden_layers=28" in first_violation(cfg, ("pp_divides_layers",))
    cfg = _with(cfg, parallelism__pipeline_parallel_size=4)
    assert first_violation(cfg, ("pp_divides_layers",)) is None


def test_batch_token_budget(make_cfg):
    cfg = _with(make_cfg("+model=llama8b"), scheduler__max_num_seqs=512,
                scheduler__max_num_batched_tokens=256)
    assert "below max_num_seqs=512" in first_violation(cfg, ("batch_token_budget",))
    cfg = _with(cfg, scheduler__max_num_seqs=64, scheduler__max_num_batched_tokens=4096,
                scheduler__enable_chunked_prefill=False)
    assert "max_model_len=8192" in first_violation(cfg, ("batch_token_budget",))
    cfg = _with(cfg, scheduler__enable_chunked_prefill=True)
    assert first_violation(cfg, ("batch_token_budget",)) is None


def test_fixed_settings_are_checked_before_the_sweep(make_cfg):
    cfg = _with(make_cfg("+model=llama70b", "parallelism.host_cores=16"),
                parallelism__tensor_parallel_size=3)
    # Sweeping TP: the fixed value does not matter.
    check_fixed(cfg, ALL, {"parallelism.tensor_parallel_size"})
    with pytest.raises(ConfigError, match="tensor_parallel_size=3 does not divide"):
        check_fixed(cfg, ALL, {"scheduler.max_num_seqs"})


def test_unknown_constraint(make_cfg):
    with pytest.raises(ConfigError, match="unknown constraint 'nope'"):
        first_violation(make_cfg("+model=llama8b"), ("nope",))


def test_context_fits(make_cfg):
    cfg = make_cfg("+model=llama8b", "workload.input_len=8000", "workload.output_len=500")
    assert "exceeds max_model_len=8192" in first_violation(cfg, ("context_fits",))
    cfg = make_cfg("+model=mixtral", "engine.max_model_len=65536")
    assert "max_position_embeddings=32768" in first_violation(cfg, ("context_fits",))
    assert first_violation(make_cfg("+model=llama8b"), ("context_fits",)) is None


@pytest.mark.parametrize("share", [True, False])
def test_a_sweep_over_the_load_alone_pays_one_engine_start(make_cfg, capsys, share):
    """#28: trials that differ only in their load run on one shared engine, so the plan
    counts the engine's start-up once; a parameter that changes the engine costs a start
    per trial."""
    from revati.tune.space import space_of, with_params
    from revati.tune.sweep import plan
    from revati.tune.walltime import estimate_wall_s

    cfg = make_cfg(f"trial.share_engine={str(share).lower()}")
    start = estimate_wall_s(cfg) - estimate_wall_s(cfg, started=True)
    assert start > 0
    rates = space_of("rates", {"params": {"workload.request_rate": {"choices": [1, 2, 4]}}})
    loads = sum(estimate_wall_s(with_params(cfg, {"workload.request_rate": r}), started=True)
                for r in (1, 2, 4))
    assert sum(plan(cfg, rates, 3, set()).values()) == pytest.approx(
        loads + start * (1 if share else 3))
    tpe = space_of("rates", {"params": {"workload.request_rate": {"low": 1.0, "high": 8.0}}})
    assert plan(cfg, tpe, 4, set()) == {"": estimate_wall_s(cfg, started=share)}
    assert ("one engine, started once" in capsys.readouterr().out) == share
    seqs = space_of("seqs", {"params": {"scheduler.max_num_seqs": {"choices": [16, 32]}}})
    assert sum(plan(cfg, seqs, 2, set()).values()) == pytest.approx(2 * estimate_wall_s(cfg))
    # trial.repeats: each trial runs its load that many times on one engine start
    load = estimate_wall_s(cfg, started=True)
    OmegaConf.update(cfg, "trial.repeats", 3)
    assert estimate_wall_s(cfg) == pytest.approx(start + 3 * load)


def test_a_resumed_plan_says_why_a_finished_point_was_skipped(make_cfg, capsys):
    """A point pruned before launch is a finished trial too: on resume the plan gives its
    reason again rather than calling it done."""
    from revati.tune.space import space_of
    from revati.tune.sweep import plan

    cfg = make_cfg("+model=llama70b")
    tp = space_of("tp", {"params": {"parallelism.tensor_parallel_size": {"choices": [1, 2]}},
                         "constraints": ["fits_in_memory"]})
    estimates = plan(cfg, tp, 1, {"TP1", "TP2"})
    lines = capsys.readouterr().out.splitlines()
    assert estimates == {}
    assert any(line.startswith("  TP1: skipped: ") and "exceed" in line for line in lines)
    assert "  TP2: done" in lines
