"""End-to-end kernel check: forward passes of real model shapes on a real GPU.

Decoders written with plain torch ops and SDPA (random weights, no checkpoint), bf16:
Llama-3.1-8B (32 layers, hidden 4096, 32/8 heads, MLP 14336; every one of its GEMM shapes is in
the micro sweeps) and Qwen2.5-14B (48 layers, hidden 5120, 40/8 heads, MLP 13824: widths the
sweeps never ran, so it checks how the models generalise). Cases: a prefill of 2,048 tokens and
decode steps of batch 64 at KV length 1,024 and 8,192 (`--case` picks others of CASES). For
each case the total GPU time (sum of CUPTI kernel/copy durations of one forward, median of
the repetitions) and every kernel of that median repetition are recorded, so an emulated run
of the same program can be compared launch by launch.

    python -m revati.profile.e2e --out DIR [--arch NAME ...] [--case NAME ...] [--reps N]
        writes e2e_<arch>.json per architecture and e2e_kernels.parquet (column arch)

The same forwards run on an emulated GPU (`revati predictor e2e`, emulated()): the GPU time is
then the span of one forward, replayed as a CUDA graph right after another, on the emulated
GPU's timeline (power state included), attention predicted from the lengths the program
reports to the shim before each forward (rv_attention_batch), as an engine's observer does.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from revati.profile.kineto import records_by_range


@dataclass(frozen=True)
class Arch:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp: int
    vocab: int


ARCHS = {
    "llama-3.1-8b": Arch(32, 4096, 32, 8, 128, 14336, 128256),
    "qwen2.5-14b": Arch(48, 5120, 40, 8, 128, 13824, 152064),
}
DEFAULT_ARCH = "llama-3.1-8b"  # the architecture of e2e rows that name none (first profile)
# name: (batch, query tokens per sequence, KV length)
CASES = {"prefill_2048": (1, 2048, 2048), "decode_b64_kv1024": (64, 1, 1024),
         "decode_b64_kv8192": (64, 1, 8192),
         # the decode steps of docs/validation.md's loads: decode-heavy (~22 running, 128
         # prompt tokens + up to 512 generated) and the saturating mixed load (200 running,
         # 512 + up to 128)
         "decode_b22_kv384": (22, 1, 384), "decode_b200_kv576": (200, 1, 576)}
DEFAULT_CASES = ("prefill_2048", "decode_b64_kv1024", "decode_b64_kv8192")
REPS = 3


def gemm_shapes(a: Arch, tokens: int, batch: int) -> list[tuple[int, int, int]]:
    """(m, n_out, k) of every linear layer of one forward: 4 per layer, then the LM head on
    the last position of each sequence."""
    per_layer = [(tokens, (a.heads + 2 * a.kv_heads) * a.head_dim, a.hidden),
                 (tokens, a.hidden, a.heads * a.head_dim), (tokens, 2 * a.mlp, a.hidden),
                 (tokens, a.hidden, a.mlp)]
    return per_layer * a.layers + [(batch, a.vocab, a.hidden)]


def build(torch, a: Arch):
    def w(*shape):
        return (torch.randn(*shape, device="cuda", dtype=torch.bfloat16) * 0.02)

    def ones():
        return torch.ones(a.hidden, device="cuda", dtype=torch.bfloat16)

    layers = [dict(ln1=ones(), qkv=w((a.heads + 2 * a.kv_heads) * a.head_dim, a.hidden),
                   o=w(a.hidden, a.heads * a.head_dim), ln2=ones(),
                   gate_up=w(2 * a.mlp, a.hidden), down=w(a.hidden, a.mlp))
              for _ in range(a.layers)]
    return dict(layers=layers, embed=w(a.vocab, a.hidden), lm_head=w(a.vocab, a.hidden),
                norm=ones())


def forward(torch, a: Arch, model, ids, positions, kv_cache, kv_len):
    """One forward. ids/positions [batch, q_len]; kv_cache (k, v) [batch, kv_heads, kv_len,
    head_dim] shared by all layers (its contents don't matter to timing; sharing keeps memory
    small while every layer still streams kv_len of cache from HBM, far past the L2)."""
    F = torch.nn.functional
    b, q_len = ids.shape
    x = F.embedding(ids, model["embed"])
    inv = 1.0 / (500000.0 ** (torch.arange(0, a.head_dim, 2, device="cuda") / a.head_dim))
    ang = positions[..., None].float() * inv
    cos = torch.cat((ang.cos(), ang.cos()), -1).to(torch.bfloat16)[:, :, None, :]
    sin = torch.cat((ang.sin(), ang.sin()), -1).to(torch.bfloat16)[:, :, None, :]

    def rope(t):
        t1, t2 = t[..., : a.head_dim // 2], t[..., a.head_dim // 2:]
        return t * cos + torch.cat((-t2, t1), -1) * sin

    for layer in model["layers"]:
        h = F.rms_norm(x, (a.hidden,), layer["ln1"], 1e-5)
        qkv = F.linear(h, layer["qkv"]).view(b, q_len, a.heads + 2 * a.kv_heads, a.head_dim)
        q, k, v = qkv.split([a.heads, a.kv_heads, a.kv_heads], dim=2)
        q, k = rope(q), rope(k)
        q = q.transpose(1, 2)
        if kv_cache is None:  # prefill: attend over the prompt itself, causally
            attn = F.scaled_dot_product_attention(q, k.transpose(1, 2), v.transpose(1, 2),
                                                  is_causal=True, enable_gqa=True)
        else:  # decode: append this step's k, v at kv_len - 1, attend over the whole cache
            ck, cv = kv_cache
            ck[:, :, kv_len - q_len:kv_len] = k.transpose(1, 2)
            cv[:, :, kv_len - q_len:kv_len] = v.transpose(1, 2)
            attn = F.scaled_dot_product_attention(q, ck[:, :, :kv_len], cv[:, :, :kv_len],
                                                  enable_gqa=True)
        attn = attn.transpose(1, 2).reshape(b, q_len, a.heads * a.head_dim)
        x = x + F.linear(attn, layer["o"])
        h = F.rms_norm(x, (a.hidden,), layer["ln2"], 1e-5)
        gu = F.linear(h, layer["gate_up"])
        x = x + F.linear(F.silu(gu[..., :a.mlp]) * gu[..., a.mlp:], layer["down"])
    # Logits of the last position of each sequence only (as serving engines do), greedy pick.
    x = F.rms_norm(x[:, -1], (a.hidden,), model["norm"], 1e-5)
    return torch.argmax(F.linear(x, model["lm_head"]).float(), -1)


def inputs(torch, a: Arch, b: int, q_len: int, kv_len: int):
    """Token ids and positions [b, q_len] of one case, and for decode its KV cache."""
    ids = torch.randint(0, a.vocab, (b, q_len), device="cuda")
    pos = torch.arange(kv_len - q_len, kv_len, device="cuda").expand(b, q_len)
    cache = None if q_len == kv_len else tuple(
        torch.randn(b, a.kv_heads, kv_len, a.head_dim, device="cuda", dtype=torch.bfloat16)
        for _ in range(2))
    return ids, pos, cache


def measure(torch, arch: str, reps: int = REPS, cases: tuple[str, ...] = DEFAULT_CASES,
            ) -> tuple[dict[str, object], list[dict[str, object]]]:
    from torch.profiler import ProfilerActivity, profile, record_function

    a = ARCHS[arch]
    torch.manual_seed(0)
    model = build(torch, a)
    results: dict[str, object] = {}
    kernels: list[dict[str, object]] = []
    with torch.no_grad():
        for ci, case in enumerate(cases):
            b, q_len, kv_len = CASES[case]
            ids, pos, cache = inputs(torch, a, b, q_len, kv_len)
            forward(torch, a, model, ids, pos, cache, kv_len)  # warm-up
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            forward(torch, a, model, ids, pos, cache, kv_len)
            end.record()
            torch.cuda.synchronize()
            eager_ms = start.elapsed_time(end)
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for rep in range(reps):
                    with record_function(f"rv#{ci}#{rep}"):
                        forward(torch, a, model, ids, pos, cache, kv_len)
                torch.cuda.synchronize()
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "trace.json")
                prof.export_chrome_trace(path)
                with open(path) as f:
                    by_range = records_by_range(json.load(f))
            recs = [by_range.get((ci, r), []) for r in range(reps)]
            totals = [sum(x.duration_ns for x in r) for r in recs]
            # The kernels recorded are those of the median repetition, so a launch-by-launch
            # sum gives the case's GPU time (prefill varies by up to 10% between repetitions).
            mid = sorted(range(reps), key=totals.__getitem__)[reps // 2]
            results[case] = {"batch": b, "q_len": q_len, "kv_len": kv_len,
                             "gpu_time_ns": totals[mid], "gpu_time_ns_reps": totals,
                             "launches": len(recs[mid]), "eager_wall_ms": round(eager_ms, 3)}
            for i, rec in enumerate(recs[mid]):
                kernels.append(dict(arch=arch, case=case, position=i, op=rec.op,
                                    kernel=rec.name, grid_x=rec.grid[0], grid_y=rec.grid[1],
                                    grid_z=rec.grid[2], block_x=rec.block[0],
                                    block_y=rec.block[1], block_z=rec.block[2],
                                    shared_bytes=rec.shared_bytes, bytes=rec.bytes,
                                    copy_kind=rec.copy_kind, duration_ns=rec.duration_ns))
            del cache
            torch.cuda.empty_cache()
            print(f"[e2e] {arch} {case}: {results[case]['gpu_time_ns'] / 1e6:.3f} ms GPU time "
                  f"in {results[case]['launches']} launches; eager wall {eager_ms:.3f} ms",
                  flush=True)
    del model
    torch.cuda.empty_cache()
    return results, kernels


def emulated(torch, arch: str, cases: tuple[str, ...] = DEFAULT_CASES) -> dict[str, object]:
    """Each case's GPU time (ns) on the emulated GPU this process runs on (one forward's span
    on the GPU timeline, replayed back to back), and which share of the predicted GPU time
    came from the roofline fallback."""
    from revati.predict.features import native

    lib = native()  # the library the device shim loaded (the same file, hence the same copy)
    totals = (ctypes.c_int64 * 3)()

    def gpu_ns() -> list[int]:
        torch.cuda.synchronize()
        lib.rv_predict_totals(totals)
        return list(totals)

    a = ARCHS[arch]
    torch.manual_seed(0)
    model = build(torch, a)
    results: dict[str, object] = {}
    with torch.no_grad():
        for case in cases:
            b, q_len, kv_len = CASES[case]
            ids, pos, cache = inputs(torch, a, b, q_len, kv_len)
            q = (ctypes.c_int64 * b)(*[q_len] * b)
            kv = (ctypes.c_int64 * b)(*[kv_len] * b)
            lib.rv_attention_batch(b, q, kv, a.heads, a.kv_heads, a.head_dim)
            forward(torch, a, model, ids, pos, cache, kv_len)
            # The real GPU ran the forwards back to back, ahead of a host that queues a
            # forward's launches in a fraction of its GPU time; this host queues them slower
            # than the emulated GPU runs them, which would leave the GPU idle (and cool, see
            # the power state) between launches. A CUDA graph replays the forward as one
            # launch, so the emulated GPU is as busy as the real one was.
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                forward(torch, a, model, ids, pos, cache, kv_len)
            before = gpu_ns()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            graph.replay()  # warm-up, as measured
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            spent = [y - x for x, y in zip(before, gpu_ns(), strict=True)]
            del graph
            # the replay's span on the GPU timeline: one forward's GPU time, power state and
            # all (the predictor's totals count a graph's nodes once, not per replay)
            gpu_time_ns = round(start.elapsed_time(end) * 1e6)
            results[case] = {"gpu_time_ns": gpu_time_ns,
                             "roofline_share": spent[1] / max(1, sum(spent))}
            print(f"[e2e] emulated {arch} {case}: {gpu_time_ns / 1e6:.3f} ms GPU time", flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    import pandas as pd
    import torch

    parser = argparse.ArgumentParser(prog="revati.profile.e2e", description=__doc__)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--arch", nargs="+", default=list(ARCHS), choices=list(ARCHS))
    parser.add_argument("--case", nargs="+", default=list(DEFAULT_CASES), choices=list(CASES))
    parser.add_argument("--reps", type=int, default=REPS,
                        help="measured repetitions of each forward (odd: the median is one)")
    parser.add_argument("--emulated", action="store_true",
                        help="on an emulated GPU: write the predicted GPU times to OUT/"
                             "e2e_emulated.json")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.emulated:
        doc = {arch: emulated(torch, arch, tuple(args.case)) for arch in args.arch}
        (args.out / "e2e_emulated.json").write_text(json.dumps(doc, indent=1) + "\n")
        return 0
    all_kernels: list[dict[str, object]] = []
    for arch in args.arch:
        results, kernels = measure(torch, arch, args.reps, tuple(args.case))
        all_kernels += kernels
        doc = {"model": f"{arch}-shaped", "architecture": vars(ARCHS[arch]),
               "dtype": "bfloat16", "gpu": torch.cuda.get_device_name(0),
               "torch": str(torch.__version__), "cuda": str(torch.version.cuda),
               "date": datetime.datetime.now(datetime.UTC).isoformat(),
               "command": "python -m revati.profile.e2e " + " ".join(argv or sys.argv[1:]),
               "note": "gpu_time_ns = sum of CUPTI kernel/copy durations of one forward "
                       "(median of the reps); eager_wall_ms = CUDA-event time of one eager "
                       "forward, launch gaps included",
               "cases": results}
        (args.out / f"e2e_{arch}.json").write_text(json.dumps(doc, indent=1) + "\n")
    pd.DataFrame(all_kernels).to_parquet(args.out / "e2e_kernels.parquet", index=False,
                                         compression="zstd")
    return 0


if __name__ == "__main__":
    sys.exit(main())
