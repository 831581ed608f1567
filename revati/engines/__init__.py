"""The serving engines Revati runs unmodified, one module each (vllm, sglang), with one
interface: NAME, MODULE, CONTEXT_FLAG, BENCH_BACKEND, JIT_DURING_SERVING, ENV, serve_env,
has_engine, serve_command, is_ready, num_gpu_blocks."""

from __future__ import annotations

from types import ModuleType

from revati.engines import sglang, vllm

ENGINES: dict[str, ModuleType] = {m.NAME: m for m in (vllm, sglang)}
