"""The serving engines Revati runs unmodified, one module each (vllm, sglang), with one
interface: NAME, MODULE, CONTEXT_FLAG, MEMORY_FLAG, MEMORY_DEFAULT, KV_FOR_ONE_CONTEXT,
WEIGHT_FLAGS, BENCH_BACKEND, JIT_DURING_SERVING, ENV_PREFIXES, ENV, serve_env, has_engine,
serve_command, is_ready, num_gpu_blocks."""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType

from revati.engines import sglang, vllm

ENGINES: dict[str, ModuleType] = {m.NAME: m for m in (vllm, sglang)}


def settings(engine: ModuleType, env: Mapping[str, str]) -> dict[str, str]:
    """What of a server's environment the engine reads as its settings: Revati's ENV and the
    variables of the engine's own prefixes, so that a run made with, e.g., a user's
    VLLM_USE_V2_MODEL_RUNNER=0 says so in its summary."""
    return {k: env[k] for k in sorted(env) if k in engine.ENV or k.startswith(engine.ENV_PREFIXES)}
