#!/usr/bin/env python3
"""Profile vLLM's fused-MoE Triton kernels (`fused_moe_kernel`) on a Hopper GPU.

vLLM 0.26.0 serves an unquantized bf16 mixture-of-experts model on Hopper through its Triton
fused-MoE backend: per MoE layer `fused_experts(hidden, w13, w2, topk_weights, topk_ids)`,
which aligns the routed tokens to the kernel's block size (moe_align_block_size), runs
`fused_moe_kernel` on w13 (N = 2 x intermediate, K = hidden), SiLU-and-mul, `fused_moe_kernel`
on w2 (N = hidden, K = intermediate), and sums the top-k outputs. This sweep calls that
function as the layer does, with vLLM's own kernel-configuration choice, for the catalog's MoE
models under TP 1..8 (each rank holds every expert, intermediate / TP wide), over the number
of tokens in the step, with uniform random routing (each token to k distinct experts, as
dummy weights route). How much a launch costs depends on how many experts' weights it reads,
which the launch itself does not show (its grid is sized for the worst case and, inside a
CUDA graph, for the captured batch); the rows carry the step's tokens, the model's experts and
top-k, the GEMM's N and K, and the experts this point's routing touched.

Every kernel of a call is recorded through revati.profile.micro.measure (Kineto, L2 flush by
reading, median of REPS). Rows are appended to OUT/moe_rows.jsonl after every chunk, so a
time limit leaves a usable partial result.

Run on the GPU machine with vLLM importable (PYTHONPATH), the repo on sys.path:
    python3 tools/profile/profile_fused_moe.py --out DIR --max-seconds 240
then, on any machine, add the rows to the profile and retrain:
    revati profile rows --profile revati/predict/data/profiles/h200 --meta DIR/moe_meta.json \
        DIR/moe_rows.jsonl
    revati predictor train --profile revati/predict/data/profiles/h200
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# (name, experts, top_k, hidden, intermediate) of the catalog's MoE models (revati/conf/model).
MODELS = (("qwen3-30b-a3b", 128, 8, 2048, 768), ("mixtral-8x7b", 8, 2, 4096, 14336))
TP = (1, 2, 4, 8)
TOKENS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
          1536, 2048, 3072, 4096, 8192)
OFF_GRID = 6  # random token counts per model layout, between the grid's


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-seconds", type=float, default=240.0)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--chunk", type=int, default=60)
    args = ap.parse_args()
    t_start = time.time()
    import torch
    from vllm.model_executor.layers.fused_moe.fused_moe import fused_experts

    from revati.profile import micro
    from revati.profile.micro import Point

    micro.REPS = args.reps
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    rng = random.Random(0)
    weights: dict[tuple[int, int, int], tuple] = {}

    def expert_weights(e: int, h: int, inter: int):
        # One set per layout, shared by its points (as a layer's weights are by every step).
        if (e, h, inter) not in weights:
            w13 = torch.randn(e, 2 * inter, h, device="cuda", dtype=torch.bfloat16) * 0.02
            w2 = torch.randn(e, h, inter, device="cuda", dtype=torch.bfloat16) * 0.02
            weights[(e, h, inter)] = (w13, w2)
        return weights[(e, h, inter)]

    def make(model, e, k, h, inter, tp, t):
        info = dict(model=model, moe_tokens=t, moe_experts=e, moe_top_k=k, hidden=h,
                    intermediate=inter, tp=tp)

        def setup():
            w13, w2 = expert_weights(e, h, inter)
            x = torch.randn(t, h, device="cuda", dtype=torch.bfloat16)
            ids = torch.rand(t, e, device="cuda").topk(k, dim=1).indices.to(torch.int32)
            gate = torch.rand(t, k, device="cuda", dtype=torch.float32)
            gate = gate / gate.sum(dim=1, keepdim=True)
            info["moe_touched"] = int(ids.unique().numel())

            def run():
                return fused_experts(x, w13, w2, gate, ids)
            return run
        return Point("moe_fused", setup, None, {}), info

    points, infos = [], []
    for model, e, k, h, inter in MODELS:
        for tp in TP:
            if inter % tp:
                continue
            tokens = sorted({*TOKENS, *(int(2 ** rng.uniform(0, 13)) for _ in range(OFF_GRID))})
            for t in tokens:
                p, info = make(model, e, k, h, inter // tp, tp, t)
                points.append(p)
                infos.append(info)
    order = list(range(len(points)))
    random.Random(1).shuffle(order)  # a time limit then leaves a uniform subsample
    points, infos = [points[i] for i in order], [infos[i] for i in order]
    print(f"[moe] {len(points)} points; setup {time.time() - t_start:.1f}s", flush=True)

    def annotate(rows: list[dict]) -> None:
        seen: dict[int, int] = {}
        for r in rows:
            info = infos[r["point"]]
            r.update(info)
            # the layer's two expert GEMMs, in launch order: w13, then w2
            if "fused_moe_kernel" in r["kernel"]:
                nth = seen.get(r["point"], 0)
                seen[r["point"]] = nth + 1
                r["moe_n"], r["moe_k"] = ((2 * info["intermediate"], info["hidden"])
                                          if nth == 0 else (info["hidden"], info["intermediate"]))

    run = micro.measure_chunks(torch, points, os.path.join(args.out, "moe_rows.jsonl"),
                               args.chunk, t_start + args.max_seconds, "moe", annotate)
    micro.write_chunked_meta(
        torch, run, os.path.join(args.out, "moe_meta.json"), len(points), t_start, "moe",
        what="vLLM 0.26.0 fused_experts (Triton fused_moe_kernel, its own config choice), "
             "bf16, uniform random top-k routing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
