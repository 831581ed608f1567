"""Kernel families: which model predicts a launch.

GEMMs seen at the cuBLAS/cuBLASLt API (Op.GEMM), copies and memsets are families by their op.
Plain kernel launches are sorted into families by case-insensitive substrings of their
demangled name, first match wins; the C predictor applies the same table, exported into the
model index by the trainer. One model per family keeps each model's feature space coherent
(an element-wise kernel's cost is in its grid, a GEMM's in m, n, k).
"""

from __future__ import annotations

from dataclasses import dataclass

from revati.predict.features import ATTENTION_MIX_OP, ATTENTION_SHAPE_OP, MOE_SHAPE_OP, Op


@dataclass(frozen=True)
class Family:
    name: str
    op: int                         # features.Op, or one of the *_OP classes beyond it
    patterns: tuple[str, ...] = ()  # Op.KERNEL only; "" matches every name
    target_mape: float = 0.10       # held-out, GPU-time weighted (issue 7)
    # Predicts from the launch alone kernels another family predicts by shape (attention by its
    # sequence lengths, cuBLAS GEMMs by their call, fused-MoE by its GEMM and routing): only
    # launches that arrive without their shape come here, and the launch cannot tell their
    # size, so its errors are large; every run reports the GPU time it predicted.
    launch_only: bool = False


FAMILIES: tuple[Family, ...] = (
    Family("gemm", Op.GEMM, target_mape=0.05),
    Family("memcpy", Op.MEMCPY),
    Family("memset", Op.MEMSET),
    Family("collective", Op.COLLECTIVE),
    # Kernel launches, in matching order.
    Family("attention", Op.KERNEL,
           ("flash", "fmha", "attention", "attn", "cutlassf", "mem_eff"), target_mape=0.08,
           launch_only=True),
    # cuBLAS(Lt)'s split-K reduction: launched inside a GEMM call after the kernel that the
    # shim tags as RV_OP_GEMM, so it is predicted on its own (grid = output tiles).
    Family("gemm_epilogue", Op.KERNEL, ("splitkreduce",)),
    Family("gemm_kernel", Op.KERNEL,
           ("gemm", "nvjet", "cutlass", "xmma", "cublas", "splitk", "gemv", "wgmma"),
           target_mape=0.05, launch_only=True),
    Family("norm", Op.KERNEL, ("norm", "moments")),
    Family("softmax_sampling", Op.KERNEL,
           ("softmax", "topk", "sort", "radix", "scan", "multinomial", "bitonic")),
    Family("reduce", Op.KERNEL, ("reduce",)),
    Family("embedding", Op.KERNEL, ("embedding", "indexselect", "index_select")),
    Family("elementwise", Op.KERNEL,
           ("elementwise", "catarray", "fill", "copy", "vectorized", "unrolled")),
    # vLLM's and SGLang's fused-MoE Triton GEMM: by launch when the model's routing is unknown
    # (REVATI_MOE unset), else by the "moe" model below.
    Family("moe_kernel", Op.KERNEL, ("fused_moe_kernel",), launch_only=True),
    Family("misc", Op.KERNEL, ("",)),
)
# Attention kernels whose sequence lengths are known (rv_predict_attention_ns): the same
# kernels as "attention", predicted from (batch, q_len, kv_len, heads, kv_heads, head_dim).
ATTENTION_SHAPE = Family("attention_shape", ATTENTION_SHAPE_OP, target_mape=0.08)
# Fused-MoE launches whose GEMM (m, n, k from their arguments) and the model's routing are
# known (rv_moe_features): predicted from the experts the step's tokens touch.
MOE_SHAPE = Family("moe", MOE_SHAPE_OP, target_mape=0.05)
# Attention launches over a step that mixes decodes with prefill chunks (chunked prefill):
# predicted from the two groups' sizes (rv_attention_mix_features), trained on the profile's
# mixed calls (hwprofile: mixed_attention.parquet).
ATTENTION_MIX = Family("attention_mix", ATTENTION_MIX_OP, target_mape=0.08)
BY_NAME = {f.name: f for f in (*FAMILIES, ATTENTION_SHAPE, MOE_SHAPE, ATTENTION_MIX)}
# Names that a family's pattern would claim wrongly, matched before every family: vLLM's
# KV-cache writes (reshape_and_cache_flash: "flash" would make them attention) are
# element-wise copies of the step's new keys and values; FlashInfer's RMSNorm kernels, which
# SGLang launches (kernel_cutlass_kernel_flashinfernormkernels...RMSNormKernel...), are norms;
# vLLM's MoE token alignment (count_and_sort_expert_tokens_kernel) is no sampling sort.
OVERRIDES: tuple[tuple[str, str], ...] = (("reshape_and_cache", "elementwise"),
                                          ("concat_and_cache", "elementwise"),
                                          ("rmsnorm", "norm"),
                                          ("count_and_sort_expert", "misc"))


def match_order() -> list[tuple[str, str]]:
    """(pattern, family) in the order a kernel name is matched, first match wins; the
    trainer exports it to the model index for the C predictor."""
    return [*OVERRIDES, *((p, f.name) for f in FAMILIES if f.op == Op.KERNEL
                          for p in f.patterns)]


def family_of(op: int, kernel: str | None) -> str | None:
    """The family a launch belongs to (None: no family, the roofline predicts it)."""
    if op != Op.KERNEL:
        return next(f.name for f in FAMILIES if f.op == op)
    if not kernel:
        return None
    low = kernel.lower()
    return next((fam for pattern, fam in match_order() if pattern in low), None)
