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

from revati_batch_report import observe, observed_class, report_lengths, reporter


def register() -> None:
    report = reporter()
    if report is None:
        return  # not under Revati's emulation: nothing to tell
    builder_class = observed_class("vllm.v1.attention.backends.flash_attn",
                                   "FlashAttentionMetadataBuilder")
    if builder_class is None:
        return

    # the parameter names are build()'s own: vLLM passes them by keyword
    def before(builder, common_prefix_len, common_attn_metadata, *_, **__) -> None:
        _report(report, builder, common_attn_metadata)

    observe(builder_class, "build", before)


def _report(report, builder, m) -> None:
    rows = m.num_reqs
    kv = m.seq_lens_cpu_upper_bound
    if kv is None:
        kv = m._seq_lens_cpu  # noqa: SLF001 (set by runners that have it on the CPU)
    if kv is None or rows <= 0:
        return
    starts = m.query_start_loc_cpu[: rows + 1]
    report_lengths(report, starts[1:] - starts[:-1], kv[:rows], builder.num_heads_q,
                   builder.num_heads_kv, builder.headdim)
