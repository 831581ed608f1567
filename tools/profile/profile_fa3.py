#!/usr/bin/env python3
"""Profile vLLM's FlashAttention-3 kernels (`vllm.vllm_flash_attn`, `_vllm_fa3_C`) on a Hopper GPU.

vLLM 0.26.0 on compute capability 9.x runs attention through FA3 (FlashAttentionImpl,
vllm/v1/attention/backends/flash_attn.py). This sweep calls the same two functions the same way:
per step the metadata builder's AOT schedule (`get_scheduler_metadata`, FA3 + full CUDA graphs),
per layer `flash_attn_varlen_func(..., seqused_k, block_table, scheduler_metadata,
fa_version=3, num_splits)` on a paged KV cache (vLLM's layout: (2, blocks, 16, kv_heads, head_dim),
blocks in random order), bf16, causal, k/v descales expanded as vLLM passes them, num_splits 32
(flash_attn_max_num_splits_for_cuda_graph) up to 512 tokens (max_cudagraph_capture_size),
else 0 (FA3's heuristic). Uniform batches, the shapes Revati's engine reports
(native/predict/dispatch.c rv_attention_batch): decode (q_len 1), prefill (q_len = kv_len) and
chunks (q_len < kv_len), for the per-GPU head layouts of the catalog models under TP 1..8.

Every kernel a point launches (scheduler/prepare kernel, main kernel, split-KV combine kernel)
is recorded through revati.profile.micro.measure (Kineto, L2 flush by reading, median of REPS),
with the attention shape columns filled. Rows are appended to OUT/fa3_rows.jsonl after every
chunk, so a time limit leaves a usable partial result. `--mixed [N]` also times N mixed
(decode + prefill chunks in one call) batches into OUT/fa3_mixed.jsonl, rows with their
per-sequence lengths (mixed_batches says which); `--only-mixed` skips the uniform sweep.

Run on the GPU machine with the FA3 module importable (PYTHONPATH), the repo on sys.path:
    python3 tools/profile/profile_fa3.py --out DIR --max-seconds 100
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

BLOCK = 16           # vLLM's default KV block size
SPLITS_CG = 32       # AttentionConfig.flash_attn_max_num_splits_for_cuda_graph
CG_MAX_TOKENS = 512  # max_cudagraph_capture_size: min(max_num_seqs * 2, 512)
MAX_KV_TOKENS = 1 << 20  # per batch: about the KV a single H200 holds for an 8B model
# (heads, kv_heads) of the catalog models (revati/conf/model): Llama-3.1-8B / Mixtral 32/8,
# Llama-3.1-70B 64/8, Qwen2.5-32B 40/8, Qwen2.5-7B 28/4, Qwen3-30B-A3B 32/4; head_dim 128.
MODELS = ((32, 8), (64, 8), (40, 8), (28, 4), (32, 4))
HEAD_DIM = 128


def head_configs() -> list[tuple[int, int, int]]:
    cfgs = set()
    for h, kv in MODELS:
        for tp in (1, 2, 4, 8):
            if h % tp == 0:
                cfgs.add((h // tp, max(1, kv // tp), HEAD_DIM))
    return sorted(cfgs)


def shapes(rng: random.Random) -> list[tuple[str, int, int, int]]:
    """(sweep, batch, q_len, kv_len) per head config."""
    out = []
    for b in (1, 2, 4, 8, 16, 32, 64, 128, 256):
        for kv in (16, 64, 256, 1024, 4096, 16384):
            if b * kv <= MAX_KV_TOKENS:
                out.append(("attn_decode_fa3", b, 1, kv))
    for _ in range(8):
        b, kv = int(2 ** rng.uniform(0, 8)), int(2 ** rng.uniform(4, 14))
        if b * kv <= MAX_KV_TOKENS:
            out.append(("attn_decode_fa3", b, 1, kv))
    for q in (16, 64, 256, 1024, 2048, 4096, 8192):
        for b in (1, 2, 4, 8, 16):
            if b * q <= 16384:
                out.append(("attn_prefill_fa3", b, q, q))
    for q in (64, 256, 512, 1024, 2048):
        for kv in (1024, 4096, 16384):
            for b in (1, 4):
                if q < kv and b * kv <= MAX_KV_TOKENS:
                    out.append(("attn_chunk_fa3", b, q, kv))
    for _ in range(3):
        q = int(2 ** rng.uniform(4, 13))
        out.append(("attn_prefill_fa3", 1, q, q))
        q, kv = int(2 ** rng.uniform(5, 11)), int(2 ** rng.uniform(11, 14))
        if q < kv:
            out.append(("attn_chunk_fa3", int(2 ** rng.uniform(0, 2)), q, kv))
    return out


def mixed_batches(n: int, nblocks: int, seed: int = 2
                  ) -> list[tuple[int, int, int, list[int], list[int]]]:
    """n engine steps that mix decodes with prefill chunks, as vLLM's chunked prefill makes
    them under load: (heads, kv_heads, head_dim, q_lens, kv_lens). 1-256 decodes with KV
    lengths of 16-5,800 tokens and 1-3 prefill chunks of 16-8,192 tokens (at most 16,384
    tokens in all, the largest step budget swept), each either a first chunk (KV = its
    query) or a later one (KV = earlier tokens + its query); half on Llama-3.1-8B's heads."""
    rng, out = random.Random(seed), []
    while len(out) < n:
        h, kvh, hd = rng.choice([(32, 8, 128)] * 4 + [(64, 8, 128), (28, 4, 128),
                                                      (8, 1, 128), (16, 4, 128)])
        nd = int(2 ** rng.uniform(0, 8))
        ql = [1] * nd + [int(2 ** rng.uniform(4, 13)) for _ in range(rng.choice((1, 1, 2, 3)))]
        kl = [int(2 ** rng.uniform(4, 12.5)) for _ in range(nd)]
        kl += [q + rng.choice((0, int(2 ** rng.uniform(5, 12.5)))) for q in ql[nd:]]
        if sum(ql) > 16384 or sum(-(-k // BLOCK) for k in kl) > nblocks // 2:
            continue
        out.append((h, kvh, hd, ql, kl))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-seconds", type=float, default=100.0)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--chunk", type=int, default=150)
    ap.add_argument("--mixed-seconds", type=float, default=10.0,
                    help="the mixed calls may run this long past --max-seconds")
    ap.add_argument("--mixed", type=int, nargs="?", const=60, default=0, metavar="N",
                    help="also time N mixed calls (default with the flag: 60)")
    ap.add_argument("--only-mixed", action="store_true", help="no uniform sweep")
    ap.add_argument("--mixed-seed", type=int, default=2, help="which mixed calls")
    args = ap.parse_args()
    t_start = time.time()
    import torch
    from vllm.vllm_flash_attn import flash_attn_varlen_func, get_scheduler_metadata

    from revati.profile import micro
    from revati.profile.micro import Point

    micro.REPS = args.reps
    os.makedirs(args.out, exist_ok=True)
    rows_path = os.path.join(args.out, "fa3_rows.jsonl")
    dev = os.environ.get("REVATI_FA3_DEVICE", "cuda")  # "cpu": dry run of the sweep code
    torch.manual_seed(0)
    rng = random.Random(0)
    cfgs = head_configs()
    # One paged KV cache per kv_heads value, shared by the head configs that have it.
    nblocks = MAX_KV_TOKENS // BLOCK + 64
    caches = {}
    for kvh in sorted({c[1] for c in cfgs}):
        kv = torch.empty(2, nblocks, BLOCK, kvh, HEAD_DIM, device=dev, dtype=torch.bfloat16)
        kv.normal_()
        caches[kvh] = kv.unbind(0)  # vLLM: key_cache, value_cache = kv_cache.unbind(0)
    perm = torch.randperm(nblocks, device=dev, dtype=torch.int64).to(torch.int32)
    one = torch.ones(1, device=dev, dtype=torch.float32)  # layer._k_scale / _v_scale

    def make(sweep, h, kvh, hd, q_lens, kv_lens, attn):
        b = len(q_lens)

        def setup():
            tokens = sum(q_lens)
            qkv = torch.randn(tokens, (h + 2 * kvh) * hd, device=dev).to(torch.bfloat16)
            q = qkv[:, : h * hd].view(-1, h, hd)  # vLLM's query: a view into qkv
            out = torch.empty(tokens, h, hd, device=dev, dtype=torch.bfloat16)
            cu = torch.tensor([0, *torch.tensor(q_lens).cumsum(0).tolist()], device=dev,
                              dtype=torch.int32)
            seqused = torch.tensor(kv_lens, device=dev, dtype=torch.int32)
            width = -(-max(kv_lens) // BLOCK)
            need = sum(-(-k // BLOCK) for k in kv_lens)
            start = rng.randrange(0, nblocks - need)
            table = torch.zeros(b, width, device=dev, dtype=torch.int32)
            pos = start
            for i, k in enumerate(kv_lens):
                n = -(-k // BLOCK)
                table[i, :n] = perm[pos:pos + n]
                pos += n
            kc, vc = caches[kvh]
            descale = one.expand(b, kvh)
            max_q, max_k = max(q_lens), max(kv_lens)
            splits = SPLITS_CG if tokens <= CG_MAX_TOKENS else 0

            def run():
                try:
                    return call()
                except AssertionError as exc:  # measure() skips points on these
                    raise ValueError(f"assertion: {exc}") from exc

            def call():
                md = get_scheduler_metadata(
                    batch_size=b, max_seqlen_q=max_q, max_seqlen_k=max_k, num_heads_q=h,
                    num_heads_kv=kvh, headdim=hd, cache_seqlens=seqused,
                    qkv_dtype=torch.bfloat16, cu_seqlens_q=cu, page_size=BLOCK, causal=True,
                    window_size=(-1, -1), num_splits=splits)
                return flash_attn_varlen_func(
                    q=q, k=kc, v=vc, out=out, cu_seqlens_q=cu, max_seqlen_q=max_q,
                    seqused_k=seqused, max_seqlen_k=max_k, softmax_scale=hd ** -0.5,
                    causal=True, alibi_slopes=None, window_size=[-1, -1], block_table=table,
                    softcap=0, scheduler_metadata=md, fa_version=3, q_descale=None,
                    k_descale=descale, v_descale=descale, dynamic_causal=None,
                    num_splits=splits, s_aux=None, mask_mod=None, aux_tensors=None)
            return run
        return Point(sweep, setup, None, attn)

    points = []
    for h, kvh, hd in cfgs:
        for sweep, b, q, kv in shapes(rng):
            points.append(make(sweep, h, kvh, hd, [q] * b, [kv] * b,
                               dict(attn_batch=b, q_len=q, kv_len=kv, heads=h, kv_heads=kvh,
                                    head_dim=hd)))
    random.Random(1).shuffle(points)  # a time limit then leaves a uniform subsample
    if args.only_mixed:
        points = []
    mixed = [make("attn_mixed_fa3", h, kvh, hd, ql, kl,
                  dict(heads=h, kv_heads=kvh, head_dim=hd, q_lens=ql, kv_lens=kl))
             for h, kvh, hd, ql, kl in mixed_batches(args.mixed, nblocks, args.mixed_seed)]
    print(f"[fa3] {len(points)} points (+{len(mixed)} mixed), {len(cfgs)} head configs "
          f"{cfgs}; setup {time.time() - t_start:.1f}s", flush=True)
    prov0 = micro.provenance(torch, " ".join(["python3", *sys.argv]))
    with open(os.path.join(args.out, "fa3_meta.json"), "w") as f:
        json.dump({"provenance": prov0, "planned_points": len(points)}, f, indent=1)
    deadline = t_start + args.max_seconds
    run = micro.measure_chunks(torch, points, rows_path, args.chunk, deadline, "fa3",
                               keep_trace=os.path.join(args.out, "fa3_trace0.json.gz"))
    if mixed:
        def lengths(rows: list[dict]) -> None:
            for r in rows:
                r.update({k: mixed[r["point"]].attn[k]
                          for k in ("q_lens", "kv_lens", "heads", "kv_heads", "head_dim")})

        mixed_run = micro.measure_chunks(
            torch, mixed, os.path.join(args.out, "fa3_mixed.jsonl"), args.chunk,
            deadline + args.mixed_seconds, "fa3 mixed", annotate=lengths)
        print(f"[fa3] mixed: {sum(mixed_run.kernels.values())} rows, "
              f"{len(mixed_run.skipped)} skipped", flush=True)
    micro.write_chunked_meta(
        torch, run, os.path.join(args.out, "fa3_meta.json"), len(points), t_start, "fa3",
        fa3_module=inspect.getfile(flash_attn_varlen_func),
        what="vLLM 0.26.0 FlashAttention-3 (vllm.vllm_flash_attn, _vllm_fa3_C) as "
             "FlashAttentionImpl calls it: AOT scheduler metadata + "
             "flash_attn_varlen_func(fa_version=3), paged KV (block 16), bf16, causal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
