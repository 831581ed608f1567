"""A vLLM plugin that tells Revati's duration predictor each step's batch.

Loaded by vLLM itself (entry point `vllm.general_plugins`, found because Revati puts this
folder on the engine's PYTHONPATH) in every engine process under emulation. Attention
kernels cost what their sequence lengths make them cost, which no launch shape shows (and
CUDA-graph replays repeat the captured launches), so the predictor has to be told. The
plugin observes, read-only: it wraps the FlashAttention metadata builder, which vLLM calls
once per step before launching that step's kernels, and passes the per-request query and
KV lengths (CPU tensors vLLM already holds) to the preloaded shim. Nothing vLLM computes
changes. Other attention backends are not observed: their kernels keep the launch-based
prediction.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)


def register() -> None:
    try:
        lib = ctypes.CDLL("librevati_predict.so")  # already loaded by the device shim
        report = lib.rv_attention_batch
    except (OSError, AttributeError):
        return  # not under Revati's emulation: nothing to tell
    report.restype = None
    report.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                       ctypes.c_int, ctypes.c_int]
    try:
        from vllm.v1.attention.backends.flash_attn import FlashAttentionMetadataBuilder
    except ImportError as e:
        log.warning("revati: FlashAttention backend not importable (%s): attention is "
                    "predicted from launches only", e)
        return
    build = FlashAttentionMetadataBuilder.build
    if getattr(build, "_revati_observed", False):
        return

    def observed_build(self, common_prefix_len, common_attn_metadata, *args, **kwargs):
        _report(report, self, common_attn_metadata)
        return build(self, common_prefix_len, common_attn_metadata, *args, **kwargs)

    observed_build._revati_observed = True
    FlashAttentionMetadataBuilder.build = observed_build


def _report(report, builder, m) -> None:
    import torch

    rows = m.num_reqs
    kv = m.seq_lens_cpu_upper_bound
    if kv is None:
        kv = m._seq_lens_cpu  # noqa: SLF001 (set by runners that have it on the CPU)
    if kv is None or rows <= 0:
        return
    starts = m.query_start_loc_cpu[: rows + 1].to(torch.int64)
    q = (starts[1:] - starts[:-1]).contiguous()
    kv = kv[:rows].to(torch.int64).contiguous()
    report(rows, q.data_ptr(), kv.data_ptr(), builder.num_heads_q, builder.num_heads_kv,
           builder.headdim)
