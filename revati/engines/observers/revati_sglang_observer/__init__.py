"""An SGLang plugin that tells Revati's duration predictor each forward's batch.

Loaded by SGLang itself (entry point `sglang.srt.plugins`, found because Revati puts this
folder on the server's PYTHONPATH) in every scheduler process under emulation, for the same
reason as the vLLM observer: attention kernels cost what their sequence lengths make them
cost, which no launch shape shows, and CUDA-graph replays repeat the captured launches. It
observes, read-only, the FlashAttention (FA3) backend, which SGLang picks on Hopper: the
backend prepares every forward's metadata before its kernels run, in init_forward_metadata
(eager forwards, and the attention pieces of breakable prefill graphs) or
init_forward_metadata_out_graph (before a full CUDA-graph replay), from a batch whose
lengths SGLang already keeps on the CPU. Other backends are not observed: their kernels
keep the launch-based prediction.
"""

from __future__ import annotations

from revati_batch_report import observe, observed_class, report_lengths, reporter


def register() -> None:
    report = reporter()
    if report is None:
        return  # not under Revati's emulation: nothing to tell
    backend_class = observed_class("sglang.srt.layers.attention.flashattention_backend",
                                   "FlashAttentionBackend")
    if backend_class is None:
        return

    def before(backend, forward_batch, *_, **__) -> None:
        _report(report, backend, forward_batch)

    observe(backend_class, "init_forward_metadata", before)
    observe(backend_class, "init_forward_metadata_out_graph", before)


def _report(report, backend, fb) -> None:
    import torch

    rows, kv, mode = fb.batch_size, fb.seq_lens_cpu, fb.forward_mode
    if kv is None or rows <= 0:
        return
    if mode.is_decode_or_idle():
        q = torch.ones(rows, dtype=torch.int64)
    elif mode.is_extend() and fb.extend_seq_lens_cpu is not None:
        q = torch.tensor(fb.extend_seq_lens_cpu[:rows], dtype=torch.int64)
    else:
        return
    report_lengths(report, q, kv[:rows], backend.num_attention_heads, backend.num_kv_heads,
                   backend.head_dim)
