"""Search spaces (a sweep's params and constraints): parsing, grids, suggestions, and
rejection of malformed spaces."""

import optuna
import pytest

from revati.tune.errors import ConfigError
from revati.tune.space import SWEEP_DIR, load_space, with_params

REQUIRED = {"tp_pp", "batching", "scheduler", "rate_capacity", "engine"}


def test_required_spaces_exist_and_load():
    assert REQUIRED <= {p.stem for p in SWEEP_DIR.glob("*.yaml")}
    for name in REQUIRED:
        space = load_space(name)
        assert space.params and space.constraints


def test_grids():
    assert load_space("tp_pp").grid_size() == 12
    assert load_space("scheduler").grid_size() == 16
    assert load_space("batching").grid_size() == 7 * 32
    assert load_space("rate_capacity").grid() is None  # request rate is continuous
    assert load_space("engine").grid() == {"engine": ["vllm", "sglang"],
                                           "parallelism.tensor_parallel_size": [1, 2]}


def test_space_of_the_composed_sweep(make_cfg):
    """The sweep run is the one composed, overrides of its params included."""
    cfg = make_cfg("sweep=engine",
                   "sweep.params={parallelism.tensor_parallel_size:{choices:[1,2,4]}}")
    space = load_space(cfg.sweep)
    assert space.name == "engine" and space.constraints == load_space("engine").constraints
    assert space.grid() == {"engine": ["vllm", "sglang"],
                            "parallelism.tensor_parallel_size": [1, 2, 4]}


def test_suggestions_stay_in_the_space():
    space = load_space("rate_capacity")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(20):
        params = space.suggest(study.ask())
        assert 0.5 <= params["workload.request_rate"] <= 64.0
        assert params["parallelism.tensor_parallel_size"] in (1, 2, 4, 8)


def test_unknown_space_names_the_value():
    with pytest.raises(ConfigError, match="unknown search space 'nope'.*tp_pp"):
        load_space("nope")


@pytest.mark.parametrize("body,match", [
    ("params: {}\n", "has no params"),
    ("params:\n  a.b: {low: 5, high: 1}\n", "low <= high"),
    ("params:\n  a.b: {choices: [1], typo: 2}\n", "unknown field.*typo"),
    ("params:\n  a.b: 3\n", "must be a mapping"),
    ("params:\n  engine: {choices: [vllm, trt]}\n", "unknown engine 'trt'.*sglang"),
])
def test_malformed_space_files(tmp_path, body, match):
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError, match=match):
        load_space(str(path))


def test_choosing_the_engine_swaps_its_flags_and_keeps_shared_settings(make_cfg):
    """A trial that samples engine=sglang runs SGLang with SGLang's flag mapping, and the
    settings every engine shares keep the sweep's values (here an override)."""
    cfg = make_cfg("engine.max_model_len=4096", "scheduler.max_num_seqs=64")
    trial = with_params(cfg, {"engine": "sglang", "parallelism.tensor_parallel_size": 2})
    assert trial.engine.name == "sglang" and trial.engine.max_model_len == 4096
    assert trial.engine.flags["scheduler.max_num_seqs"].flag == "--max-running-requests"
    assert trial.parallelism.tensor_parallel_size == 2
    assert cfg.engine.name == "vllm"  # the sweep's own configuration is left alone
    back = with_params(trial, {"engine": "vllm"})
    assert back.engine.flags["scheduler.max_num_seqs"].flag == "--max-num-seqs"
