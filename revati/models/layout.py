"""What a model admits: the rules the engines enforce at start-up on a tensor x pipeline
layout and on request lengths, in one place for `revati bench` and the tuner's constraints.
Each returns None when the value passes, else a one-line reason naming it."""

from __future__ import annotations

from typing import Any

from revati.models.sizing import kv_cache_bytes_per_token, weight_bytes_per_gpu

GIB = 1 << 30


def tp_problem(model: str, tp: int, heads: int, kv_heads: int) -> str | None:
    # The engines split attention heads evenly over TP ranks; KV heads are split when there
    # are at least as many as ranks, otherwise replicated, which needs tp % kv_heads == 0.
    if tp < 1:
        return f"tensor parallel size {tp} must be at least 1"
    if heads % tp:
        return (f"tensor_parallel_size={tp} does not divide num_attention_heads={heads} "
                f"of {model}")
    if (kv_heads % tp) if tp <= kv_heads else (tp % kv_heads):
        return (f"tensor_parallel_size={tp} and num_key_value_heads={kv_heads} of {model} "
                f"do not divide one another")
    return None


def pp_problem(model: str, pp: int, layers: int) -> str | None:
    if pp < 1:
        return f"pipeline parallel size {pp} must be at least 1"
    if layers % pp:
        return (f"pipeline_parallel_size={pp} does not divide num_hidden_layers={layers} "
                f"of {model}")
    return None


def layout_problem(model: str, config: dict[str, Any], tp: int, pp: int) -> str | None:
    """tp_problem and pp_problem of a model's config (its Hugging Face config.json keys)."""
    return (tp_problem(model, tp, config["num_attention_heads"],
                       config.get("num_key_value_heads") or config["num_attention_heads"])
            or pp_problem(model, pp, config["num_hidden_layers"]))


def context_problem(input_len: int, output_len: int, max_len: int, setting: str) -> str | None:
    """setting: what set the context of max_len tokens (an engine flag, a config key)."""
    # the engines reject (fail) every request whose prompt plus output exceeds the context
    if input_len + output_len > max_len:
        return f"input_len={input_len} + output_len={output_len} exceeds {setting}={max_len}"
    return None


def memory_problem(model: str, config: dict[str, Any], tp: int, pp: int, *, weight_dtype: str,
                   kv_dtype: str, context_tokens: int, usable_bytes: float, total_bytes: int,
                   setting: str) -> str | None:
    """Weights of the most loaded GPU, plus the KV cache of one context_tokens-long request
    (vLLM refuses to start unless its cache holds one; 0 where the engine does not ask),
    against the memory the engine gives them (usable_bytes, what `setting` leaves of the
    GPU's total_bytes). Activations are not counted: a layout this refuses cannot start,
    one it passes may still not."""
    weights = weight_bytes_per_gpu(config, tp, pp, weight_dtype)
    kv = kv_cache_bytes_per_token(config, kv_dtype, tp, pp) * context_tokens
    if weights + kv <= usable_bytes:
        return None
    need = f"weights {weights / GIB:.1f} GiB"
    if context_tokens:
        need += f" + KV of one {context_tokens}-token sequence {kv / GIB:.2f} GiB"
    return (f"{model} at tp={tp} pp={pp}: {need} per GPU exceed the {usable_bytes / GIB:.1f} "
            f"GiB usable of {total_bytes / GIB:.1f} GiB at {setting}")
