"""Sizes derived from a Hugging Face model config: parameters, weight bytes, KV bytes.

Covers the architectures in the catalog: dense Llama/Qwen2/Qwen3 decoders and the
Mixtral/Qwen3-MoE mixture-of-experts variants (SwiGLU MLPs, RMSNorm, GQA attention).
The counts match the real checkpoints exactly (tests pin them), so memory constraints
use the same numbers the engine will see when it allocates weights.
"""

from __future__ import annotations

import math
from typing import Any

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "fp8": 1, "float8": 1}

# Qwen2 checkpoints carry q/k/v biases although their config has no field saying so.
_IMPLICIT_QKV_BIAS = {"qwen2"}
# Qwen3 normalises queries and keys per head (q_norm, k_norm of head_dim each).
_QK_NORM = {"qwen3", "qwen3_moe"}


# the engines' (torch's) names of dtypes this module spells otherwise
_DTYPE_ALIASES = {"half": "float16", "float": "float32"}


def engine_dtypes(weights: str, kv_cache: str, model_dtype: str) -> tuple[str, str]:
    """(weight dtype, KV-cache dtype) as this module names them, from an engine's --dtype and
    --kv-cache-dtype values: "auto" is the checkpoint's dtype (model_dtype) for the weights
    and the weights' for the KV cache, every fp8 variant is fp8. A name it does not know is
    returned as given (dtype_bytes says so)."""
    w = model_dtype if weights == "auto" else _DTYPE_ALIASES.get(weights, weights)
    if kv_cache == "auto":
        return w, w
    return w, "fp8" if kv_cache.startswith("fp8") else _DTYPE_ALIASES.get(kv_cache, kv_cache)


def dtype_bytes(dtype: str) -> int:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype '{dtype}' (known: {', '.join(DTYPE_BYTES)})") from None


def head_dim(cfg: dict[str, Any]) -> int:
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def expert_layout(cfg: dict[str, Any]) -> tuple[int, int, int]:
    """(experts per layer, experts used per token, expert MLP width); (1, 1, width) if dense."""
    experts = cfg.get("num_local_experts") or cfg.get("num_experts") or 0
    if experts:
        width = cfg.get("moe_intermediate_size") or cfg["intermediate_size"]
        return experts, cfg["num_experts_per_tok"], width
    return 1, 1, cfg["intermediate_size"]


def routing_env(cfg: dict[str, Any]) -> dict[str, str]:
    """The duration predictor's view of an MoE model's routing (REVATI_MOE, native/predict/shapes.c:
    its fused-MoE kernels cost what the experts a step touches make them cost); {} if dense."""
    experts, per_token, _ = expert_layout(cfg)
    return {"REVATI_MOE": f"{experts} {per_token}"} if experts > 1 else {}


def _layer_params(cfg: dict[str, Any], active_only: bool) -> int:
    h, hd = cfg["hidden_size"], head_dim(cfg)
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    attn = h * q + 2 * h * kv + q * h
    if cfg.get("attention_bias", cfg["model_type"] in _IMPLICIT_QKV_BIAS):
        attn += q + 2 * kv
    if cfg["model_type"] in _QK_NORM:
        attn += 2 * hd
    experts, per_token, width = expert_layout(cfg)
    mlp = (per_token if active_only else experts) * 3 * h * width
    router = h * experts if experts > 1 else 0
    return attn + mlp + router + 2 * h  # + input and post-attention RMSNorm


def parameter_count(cfg: dict[str, Any], active_only: bool = False) -> int:
    """Parameters of the checkpoint (active_only: those one token runs through, for MoE)."""
    embed = cfg["vocab_size"] * cfg["hidden_size"]
    lm_head = 0 if cfg.get("tie_word_embeddings") else embed
    layers = cfg["num_hidden_layers"] * _layer_params(cfg, active_only)
    return embed + layers + cfg["hidden_size"] + lm_head  # + final RMSNorm


def weight_bytes(cfg: dict[str, Any], dtype: str = "bfloat16") -> int:
    return parameter_count(cfg) * dtype_bytes(dtype)


def weight_bytes_per_gpu(cfg: dict[str, Any], tp: int, pp: int, dtype: str = "bfloat16") -> int:
    """Weights of the most loaded GPU: TP shards every matrix (the vocabulary too), PP gives
    each stage ceil(layers / pp) layers, the first stage the embedding, the last the final
    norm and LM head."""
    embed = cfg["vocab_size"] * cfg["hidden_size"]
    head = cfg["hidden_size"] + (0 if cfg.get("tie_word_embeddings") else embed)
    stage_layers = math.ceil(cfg["num_hidden_layers"] / pp) * _layer_params(cfg, False)
    ends = embed + head if pp == 1 else max(embed, head)
    return math.ceil((stage_layers + ends) / tp) * dtype_bytes(dtype)


def kv_heads_per_gpu(cfg: dict[str, Any], tp: int) -> int:
    # With more TP ranks than KV heads, vLLM replicates each KV head on tp / kv_heads ranks.
    return max(1, cfg["num_key_value_heads"] // tp)


def kv_cache_bytes_per_token(
    cfg: dict[str, Any], dtype: str = "bfloat16", tp: int = 1, pp: int = 1
) -> int:
    """KV-cache bytes one token occupies on one GPU (tp = pp = 1: the whole model)."""
    layers = math.ceil(cfg["num_hidden_layers"] / pp)
    return 2 * layers * kv_heads_per_gpu(cfg, tp) * head_dim(cfg) * dtype_bytes(dtype)
