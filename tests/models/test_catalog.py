"""Model catalog: names and aliases, config fields, sizes against the real checkpoints."""

import pytest

from revati.models.catalog import (
    UnknownModelError,
    alias_table,
    list_models,
    load_model,
    resolve_name,
)
from revati.models.sizing import (
    kv_cache_bytes_per_token,
    parameter_count,
    routing_env,
    weight_bytes,
    weight_bytes_per_gpu,
)

REQUIRED = {"llama3_8b", "llama3_70b", "qwen2_5_7b", "qwen2_5_32b", "mixtral_8x7b", "qwen3_30b_a3b"}


def test_catalog_has_the_required_models():
    assert REQUIRED <= set(list_models())
    assert {"llama8b", "llama70b"} <= set(list_models(aliases=True)) - set(list_models())


@pytest.mark.parametrize("alias,name", [("llama70b", "llama3_70b"), ("llama8b", "llama3_8b"),
                                        ("llama3_70b", "llama3_70b")])
def test_aliases_resolve(alias, name):
    assert resolve_name(alias) == name
    assert load_model(alias).name == name


def test_aliases_are_listed_in_the_model_files():
    assert alias_table() == {"llama8b": "llama3_8b", "llama70b": "llama3_70b",
                             "mixtral": "mixtral_8x7b", "qwen7b": "qwen2_5_7b",
                             "qwen32b": "qwen2_5_32b", "qwen3_30b": "qwen3_30b_a3b"}


def test_unknown_model_names_the_bad_value():
    with pytest.raises(UnknownModelError, match="unknown model 'gpt5'.*llama3_8b"):
        load_model("gpt5")


def test_llama70b_config_fields():
    cfg = load_model("llama70b").config
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    assert (cfg["hidden_size"], cfg["num_hidden_layers"]) == (8192, 80)
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"]) == (64, 8)
    assert cfg["vocab_size"] == 128256
    assert cfg["rope_scaling"]["rope_type"] == "llama3"


# Parameter counts of the published checkpoints (safetensors metadata totals).
@pytest.mark.parametrize("name,params", [
    ("llama3_8b", 8_030_261_248),
    ("llama3_70b", 70_553_706_496),
    ("qwen2_5_7b", 7_615_616_512),
    ("qwen2_5_32b", 32_763_876_352),
    ("mixtral_8x7b", 46_702_792_704),
    ("qwen3_30b_a3b", 30_532_122_624),
])
def test_parameter_count_matches_checkpoint(name, params):
    cfg = load_model(name).config
    assert parameter_count(cfg) == params
    assert weight_bytes(cfg, "bfloat16") == 2 * params
    assert weight_bytes(cfg, "fp8") == params


def test_moe_active_parameters_are_fewer():
    cfg = load_model("qwen3_30b_a3b").config
    assert 3.0e9 < parameter_count(cfg, active_only=True) < 3.5e9  # the "A3B" in the name


def test_kv_cache_bytes_per_token():
    cfg = load_model("llama8b").config
    assert kv_cache_bytes_per_token(cfg) == 2 * 32 * 8 * 128 * 2  # K and V, 32 layers, bf16
    assert kv_cache_bytes_per_token(cfg, tp=2) == kv_cache_bytes_per_token(cfg) // 2
    assert kv_cache_bytes_per_token(cfg, pp=2) == kv_cache_bytes_per_token(cfg) // 2
    # TP 16 > 8 KV heads: each rank still holds one (replicated) head.
    assert kv_cache_bytes_per_token(cfg, tp=16) == kv_cache_bytes_per_token(cfg, tp=8)
    assert kv_cache_bytes_per_token(cfg, dtype="fp8") == kv_cache_bytes_per_token(cfg) // 2


def test_weights_per_gpu_shrink_with_parallelism():
    cfg = load_model("llama70b").config
    whole = weight_bytes(cfg)
    assert weight_bytes_per_gpu(cfg, 1, 1) == whole
    assert weight_bytes_per_gpu(cfg, 4, 1) == pytest.approx(whole / 4, rel=1e-6)
    # PP stages are uneven: the first holds the embedding, the last the LM head.
    assert whole / 2 < weight_bytes_per_gpu(cfg, 1, 2) < 0.52 * whole


def test_routing_of_moe_models_reaches_the_predictor():
    """REVATI_MOE carries experts and experts per token (native/predict/models.c); dense:
    nothing."""
    assert routing_env(load_model("qwen3_30b_a3b").config) == {"REVATI_MOE": "128 8"}
    assert routing_env(load_model("mixtral_8x7b").config) == {"REVATI_MOE": "8 2"}
    assert routing_env(load_model("llama3_8b").config) == {}
