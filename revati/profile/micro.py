"""`revati profile micro`: shape sweeps of the kernel families LLM serving runs, on a real GPU.

Every sweep point is a small torch program (a linear layer, an SDPA call, an RMSNorm, ...) run
once to warm up and then REPS times, each repetition after an L2 flush and inside a profiler
range; CUPTI's records of the kernels, copies and memsets launched in those ranges become the
rows of the hardware profile (hwprofile.py), with exactly the fields the device shim sees
(kineto.py says why Kineto). GEMM points add one library-call row (Op.GEMM: m, n, k, dtypes,
transposes as torch passes them to cuBLAS/cuBLASLt, duration = the call's first kernel, which
is the launch the shim tags with the GEMM's shape).

Needs torch with CUDA; pandas, pyarrow and PyYAML to write the profile.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import gzip
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from revati.predict.features import MOE_COLUMNS, CopyKind, DType, Op, empty_launch_row
from revati.profile.kineto import GpuRecord, records_by_range

REPS = 5
CHUNK = 300  # points per profiler session: keeps one Chrome trace to tens of MB

# Model widths of the dense models serving is tuned for: (hidden, heads, kv_heads, head_dim,
# intermediate, vocab). TP 1..8 splits give the GEMM (n, k) and attention head counts.
MODELS = {
    "llama-3.1-8b": (4096, 32, 8, 128, 14336, 128256),
    "llama-3.1-70b": (8192, 64, 8, 128, 28672, 128256),
    "qwen2.5-7b": (3584, 28, 4, 128, 18944, 152064),
}
TP = (1, 2, 4, 8)
GEMM_M = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072,
          4096, 6144, 8192)
TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
SAMPLE_ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


@dataclass
class Point:
    sweep: str
    setup: Callable[[], Callable[[], object]]  # allocates inputs, returns the measured program
    call: dict[str, object] | None = None      # library-call row (GEMM)
    attn: dict[str, int] = field(default_factory=dict)


def linear_shapes(models: dict = MODELS) -> list[tuple[int, int]]:
    """Distinct (out_features, in_features) of the linear layers of MODELS under TP 1..8."""
    shapes = []
    for hidden, heads, kv, hd, inter, vocab in models.values():
        for tp in TP:
            if heads % tp or inter % tp:
                continue
            kv_tp = max(1, kv // tp)
            shapes += [((heads // tp + 2 * kv_tp) * hd, hidden), (hidden, heads // tp * hd),
                       (2 * inter // tp, hidden), (hidden, inter // tp), (vocab // tp, hidden)]
    return sorted(set(shapes))


def head_configs(models: dict = MODELS) -> list[tuple[int, int, int]]:
    """Distinct (heads, kv_heads, head_dim) per GPU of MODELS under TP 1..8."""
    cfgs = set()
    for _, heads, kv, hd, _, _ in models.values():
        for tp in TP:
            if heads % tp == 0:
                cfgs.add((heads // tp, max(1, kv // tp), hd))
    return sorted(cfgs)


def gemm_call(m: int, n: int, k: int, dt_in: DType, dt_out: DType) -> dict[str, object]:
    """The cuBLAS call torch makes for x[m,k] @ W[n,k]^T, in cuBLAS's column-major terms:
    C^T[n,m] = W^T^T x^T, i.e. m_blas = n (out features), n_blas = m (tokens), A transposed."""
    row = empty_launch_row(Op.GEMM)
    row.update(m=n, n=m, k=k, batch=1, dtype_a=int(dt_in), dtype_b=int(dt_in),
               dtype_c=int(dt_out), trans_a=1, trans_b=0)
    return row


def pick_count(quick: bool, n: int) -> int:
    return min(n, 3) if quick else n


def sweeps(torch, quick: bool = False) -> Iterator[Point]:
    """All sweep points, family by family. quick: a handful per family (smoke test)."""
    F = torch.nn.functional
    dev = "cuda"

    def pick(seq):
        seq = list(seq)
        return [seq[0], seq[len(seq) // 2], seq[-1]] if quick else seq

    def rnd(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, device=dev, dtype=torch.float32).to(dtype)

    def lookup(t: int, hidden: int, vocab: int) -> Callable[[], Callable[[], object]]:
        """An embedding lookup of t rows of a (vocab, hidden) table."""
        def setup():
            table = rnd(vocab, hidden)
            ids = torch.randint(0, vocab, (t,), device=dev)
            return lambda: F.embedding(ids, table)
        return setup

    rng = random.Random(0)
    shapes = pick(linear_shapes())
    fp16_shapes = pick(linear_shapes({"llama-3.1-8b": MODELS["llama-3.1-8b"]}))
    # --- GEMMs: torch.nn.functional.linear (cuBLAS/cuBLASLt), bf16 and fp16.
    for name, dtype, dt in (("gemm_bf16", torch.bfloat16, DType.BF16),
                            ("gemm_fp16", torch.float16, DType.F16)):
        for n, k in (shapes if dt == DType.BF16 else fp16_shapes):
            # Serving sees any token count: a few log-uniform m per shape beside the grid.
            extra = [] if quick or dt != DType.BF16 else sorted(
                {int(2 ** rng.uniform(0, 13)) for _ in range(4)} - set(GEMM_M))
            for m in [*pick(GEMM_M), *extra]:
                def setup(m=m, n=n, k=k, dtype=dtype):
                    x, w = rnd(m, k, dtype=dtype), rnd(n, k, dtype=dtype)
                    return lambda: F.linear(x, w)
                yield Point(name, setup, gemm_call(m, n, k, dt, dt))
    # Widths of models not listed above: random (n, k), multiples of 128 from 1,024 to 65,536,
    # so the GEMM model interpolates between shapes instead of memorising MODELS' widths. Own
    # random stream, so adding it left the other sweeps' off-grid draws unchanged.
    offgrid = random.Random(1)
    for _ in range(pick_count(quick, 48)):
        n, k = (128 * int(2 ** offgrid.uniform(3, 9)) for _ in range(2))
        for m in sorted({int(2 ** offgrid.uniform(0, 13)) for _ in range(10)}):
            def setup(m=m, n=n, k=k):
                x, w = rnd(m, k), rnd(n, k)
                return lambda: F.linear(x, w)
            yield Point("gemm_bf16_offgrid", setup, gemm_call(m, n, k, DType.BF16, DType.BF16))
    # --- FP8 (e4m3, per-tensor scales, bf16 out) through torch._scaled_mm (cuBLASLt).
    for n, k in shapes:
        for m in pick(GEMM_M[::2]):
            def setup(m=m, n=n, k=k):
                a = rnd(m, k).to(torch.float8_e4m3fn)
                b = rnd(n, k).to(torch.float8_e4m3fn).t()  # column-major [k, n]
                one = torch.ones((), device=dev, dtype=torch.float32)
                return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                                out_dtype=torch.bfloat16)
            yield Point("gemm_fp8", setup, gemm_call(m, n, k, DType.FP8_E4M3, DType.BF16))
    # --- Attention through torch SDPA's flash and memory-efficient backends.
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.bias import causal_lower_right

    def sdpa_point(sweep, backend, b, q_len, kv_len, h, kvh, hd, causal):
        # A causal query shorter than its KV (chunked prefill, speculative verification) sees
        # the KV up to its own position: the mask is aligned to the bottom right, as engines do.
        mask = ({"attn_mask": causal_lower_right(q_len, kv_len)} if causal and q_len != kv_len
                else {"is_causal": causal})

        def setup():
            q = rnd(b, h, q_len, hd)
            k, v = rnd(b, kvh, kv_len, hd), rnd(b, kvh, kv_len, hd)
            with sdpa_kernel([backend]):
                try:  # grouped-query attention natively where the backend has it
                    F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **mask)
                    gqa = True
                except RuntimeError:
                    gqa = False
            if not gqa and kvh != h:
                k, v = (t.repeat_interleave(h // kvh, dim=1) for t in (k, v))

            def run():
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa, **mask)
            return run
        return Point(sweep, setup, None, dict(attn_batch=b, q_len=q_len, kv_len=kv_len, heads=h,
                                               kv_heads=kvh, head_dim=hd))

    # cuDNN is what SDPA picks by default on Hopper (seen in the e2e check), flash and
    # memory-efficient are its fallbacks.
    for bname, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                           ("flash", SDPBackend.FLASH_ATTENTION),
                           ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
        for h, kvh, hd in pick(head_configs()):
            for b in pick((1, 2, 4)):
                for seq in pick((128, 256, 512, 1024, 2048, 4096, 8192, 16384)):
                    if b * seq <= 32768:
                        yield sdpa_point(f"attn_prefill_{bname}", backend, b, seq, seq, h, kvh,
                                         hd, True)
            for b in pick((1, 2, 4, 8, 16, 32, 64, 128, 256)):
                for kv_len in pick((128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)):
                    if b * kv_len <= 1 << 20:
                        yield sdpa_point(f"attn_decode_{bname}", backend, b, 1, kv_len, h, kvh,
                                         hd, False)
            # Chunked prefill and speculative verification: causal queries shorter than their
            # KV. Not through cuDNN: SDPA builds a dense bottom-right mask for it (extra kernels
            # and a masked kernel), which no engine does.
            for q_len in pick((2, 4, 8, 64, 256, 512, 1024, 2048)) if bname != "cudnn" else ():
                for kv_len in pick((1024, 4096, 16384)):
                    for b in pick((1, 4, 16)):
                        if q_len < kv_len and b * kv_len <= 1 << 20 and b * q_len <= 16384:
                            yield sdpa_point(f"attn_chunk_{bname}", backend, b, q_len, kv_len,
                                             h, kvh, hd, True)
            if bname == "cudnn" and not quick:  # off-grid shapes of the default backend
                for _ in range(16):
                    b, kv_len = int(2 ** rng.uniform(0, 8)), int(2 ** rng.uniform(6, 15))
                    if b * kv_len <= 1 << 20:
                        yield sdpa_point(f"attn_decode_{bname}", backend, b, 1, kv_len, h,
                                         kvh, hd, False)
                for _ in range(6):
                    seq = int(2 ** rng.uniform(7, 14))
                    yield sdpa_point(f"attn_prefill_{bname}", backend, 1, seq, seq, h, kvh, hd,
                                     True)
    # --- Normalisation, activation, rotary, element-wise (bf16 activations).
    hiddens = sorted({m[0] for m in MODELS.values()})
    for h in pick(hiddens):
        for t in pick(TOKENS):
            def norm(t=t, h=h):
                x, w = rnd(t, h), rnd(h)
                return lambda: F.rms_norm(x, (h,), w, 1e-6)
            yield Point("rms_norm", norm)

            def residual(t=t, h=h):
                x, y = rnd(t, h), rnd(t, h)
                return lambda: x + y
            yield Point("elementwise_add", residual)

            def cast(t=t, h=h):
                x = rnd(t, h)
                return lambda: x.float()
            yield Point("elementwise_cast", cast)

            def fill(t=t, h=h):
                x = rnd(t, h)
                return lambda: x.zero_()
            yield Point("elementwise_fill", fill)

            def mean(t=t, h=h):
                x = rnd(t, h)
                return lambda: x.float().pow(2).mean(-1, keepdim=True)
            yield Point("reduce_mean", mean)
    inters = sorted({m[4] // tp for m in MODELS.values() for tp in TP})
    for d in pick(inters):
        for t in pick(TOKENS):
            def silu_mul(t=t, d=d):
                x = rnd(t, 2 * d)
                return lambda: F.silu(x[:, :d]) * x[:, d:]
            yield Point("silu_and_mul", silu_mul)
    for h, kvh, hd in pick(head_configs()):
        for t in pick(TOKENS):
            def rotary(t=t, h=h, kvh=kvh, hd=hd):
                q, k = rnd(t, h, hd), rnd(t, kvh, hd)
                cos, sin = rnd(t, 1, hd), rnd(t, 1, hd)

                def rot(x):
                    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
                    return torch.cat((-x2, x1), dim=-1)
                return lambda: (q * cos + rot(q) * sin, k * cos + rot(k) * sin)
            yield Point("rotary", rotary)
    # --- Logits processing and sampling-like ops (fp32 logits [rows, vocab]).
    def mk(op, r, v):
        def setup():
            x = rnd(r, v, dtype=torch.float32)
            p = torch.softmax(x, -1)
            return {"softmax": lambda: torch.softmax(x / 0.7, -1),
                    "argmax": lambda: torch.argmax(x, -1),
                    "max": lambda: x.max(-1),
                    "sum": lambda: x.sum(-1),
                    "topk": lambda: torch.topk(x, 50, -1),
                    "sort": lambda: torch.sort(x, -1, descending=True),
                    "cumsum": lambda: torch.cumsum(p, -1),
                    "multinomial": lambda: torch.multinomial(p, 1)}[op]
        return setup

    vocabs = sorted({m[5] for m in MODELS.values()})
    for v in pick(vocabs):
        for r in pick(SAMPLE_ROWS):
            for op in ("softmax", "argmax", "max", "sum", "topk", "sort", "cumsum",
                       "multinomial"):
                yield Point(f"sampling_{op}", mk(op, r, v))
    # --- Embedding lookup.
    for hidden, *_, vocab in pick(list(MODELS.values())):
        for t in pick(TOKENS):
            yield Point("embedding", lookup(t, hidden, vocab))
    # --- Copies: pinned host <-> device (what engines use for non-blocking copies), D2D.
    for kind in (CopyKind.H2D, CopyKind.D2H, CopyKind.D2D):
        for shift in pick(range(8, 31, 2)):
            def copy(kind=kind, nbytes=1 << shift):
                n = nbytes // 2
                if kind == CopyKind.H2D:
                    src = torch.empty(n, dtype=torch.bfloat16).pin_memory()
                    dst = torch.empty(n, dtype=torch.bfloat16, device=dev)
                elif kind == CopyKind.D2H:
                    src = rnd(n)
                    dst = torch.empty(n, dtype=torch.bfloat16).pin_memory()
                else:
                    src, dst = rnd(n), torch.empty(n, dtype=torch.bfloat16, device=dev)
                return lambda: dst.copy_(src, non_blocking=True)
            yield Point(f"memcpy_{kind.name.lower()}", copy)
    # --- Off-grid widths for the launch-only families, whose sizes only the kernel arguments
    # carry: hidden sizes and vocabularies of models not listed above, and token and row
    # counts off the powers of two, so those models learn sizes rather than memorise MODELS'.
    # Own random stream, drawn after every other sweep's.
    wide = random.Random(2)
    vocab_sizes = (32000, 32064, 49152, 50304, 64000, 92416, 100352, 128256, 151936, 152064,
                   163840, 201088, 256000)
    for _ in range(pick_count(quick, 64)):
        h, t = 128 * wide.randint(8, 128), int(2 ** wide.uniform(0, 14))

        def norm_offgrid(t=t, h=h):
            x, w = rnd(t, h), rnd(h)
            return lambda: F.rms_norm(x, (h,), w, 1e-6)
        yield Point("rms_norm_offgrid", norm_offgrid)

        def cat_offgrid(t=t, h=h):
            x = rnd(t, h)
            return lambda: torch.cat((-x[..., h // 2:], x[..., : h // 2]), dim=-1)
        yield Point("elementwise_cat_offgrid", cat_offgrid)
    for _ in range(pick_count(quick, 40)):
        v, r = wide.choice(vocab_sizes), int(2 ** wide.uniform(0, 10))
        for op in ("softmax", "argmax", "max", "sum", "topk", "sort", "cumsum", "multinomial"):
            yield Point(f"sampling_{op}_offgrid", mk(op, r, v))
    for _ in range(pick_count(quick, 40)):
        v, h, t = wide.choice(vocab_sizes), 128 * wide.randint(8, 64), int(2 ** wide.uniform(0, 14))
        yield Point("embedding_offgrid", lookup(t, h, v))
    # Embedding lookups of 1-16 rows, the only ones PyTorch runs with index_select (more rows
    # take an element-wise gather): the off-grid draw above lands there one time in four.
    # Own stream, so adding it left the sweeps above as they were (2026-12-02).
    small = random.Random(3)
    for _ in range(pick_count(quick, 64)):
        v, h, t = small.choice(vocab_sizes), 128 * small.randint(8, 64), small.randint(1, 16)
        yield Point("embedding_rows", lookup(t, h, v))
    # Sorts, top-k, cumulative sums and softmaxes of 128-1024 rows over the large
    # vocabularies: those take most of the sampling family's GPU time, and with only a few
    # such points each held-out one was an extrapolation (a top-k of 955 x 256,000 predicted
    # 4x fast). Own stream, added 2026-12-02 after the sweeps above.
    large = random.Random(4)
    for _ in range(pick_count(quick, 32)):
        v, r = large.choice(vocab_sizes[6:]), int(2 ** large.uniform(7, 10))
        for op in ("softmax", "topk", "sort", "cumsum"):
            yield Point(f"sampling_large_{op}", mk(op, r, v))


def point_rows(index: int, point: Point, reps: list[list[GpuRecord]]) -> list[dict]:
    """Profile rows of one point from the GPU records of its repetitions."""
    if not reps:
        return []
    # Repetitions should launch identical sequences; keep those of the usual length.
    common = Counter(len(r) for r in reps).most_common(1)[0][0]
    reps = [r for r in reps if len(r) == common]
    rows = []
    context = dict(sweep=point.sweep, point=index, reps=len(reps),
                   **{c: point.attn.get(c, 0) for c in ("attn_batch", "q_len", "kv_len",
                                                        "heads", "kv_heads", "head_dim")},
                   **dict.fromkeys(MOE_COLUMNS, 0))  # no routed MoE launch in these sweeps
    for pos in range(common):
        rec = reps[0][pos]
        row = empty_launch_row(Op(rec.op))
        row.update(kernel=rec.name if rec.op == Op.KERNEL else "",
                   grid_x=rec.grid[0], grid_y=rec.grid[1], grid_z=rec.grid[2],
                   block_x=rec.block[0], block_y=rec.block[1], block_z=rec.block[2],
                   shared_bytes=rec.shared_bytes, bytes=rec.bytes, copy_kind=rec.copy_kind,
                   position=pos,
                   duration_ns=int(statistics.median(r[pos].duration_ns for r in reps)),
                   **context)
        rows.append(row)
    if point.call is not None:
        # The device shim attributes a cuBLAS call's shape to the call's first kernel launch
        # (RV_OP_GEMM); its other work (split-K reductions, semaphore memsets) reaches the
        # predictor as the plain launches recorded above. The call row times that kernel alone.
        first = next((pos for pos in range(common) if reps[0][pos].op == Op.KERNEL), None)
        if first is not None:
            rows.append(dict(point.call, position=-1, **context, duration_ns=int(
                statistics.median(r[first].duration_ns for r in reps))))
    return rows


def measure(torch, points: list[Point], log=print, keep_trace: str | None = None,
            max_seconds: float = float("inf")) -> tuple[list[dict], list[str]]:
    """Profile points in chunks; returns profile rows and the points that could not run.
    keep_trace: gzip the first chunk's Chrome trace there (for debugging the parser).
    max_seconds: start no chunk after that long (the rest is reported as skipped), so a
    run on a leased GPU ends with a profile rather than being killed without one."""
    from torch.profiler import ProfilerActivity, profile, record_function

    # L2 flush before each repetition: serving reads weights and KV cache cold. Reading (not
    # writing) 4x the 60 MB L2 leaves it full of clean lines; a zero-fill flush left dirty lines
    # whose write-back slowed memory-bound GEMMs by 10-18% against the same GEMMs inside a
    # real forward pass (seen in the first H200 profile).
    flush = torch.ones(256 << 20, dtype=torch.uint8, device="cuda")
    rows, skipped = [], []
    began = time.time()
    for start in range(0, len(points), CHUNK):
        chunk = points[start:start + CHUNK]
        t0 = time.time()
        if t0 - began > max_seconds:
            skipped.append(f"points {start}..{len(points) - 1}: over --max-seconds")
            log(f"[micro] time budget spent: {len(points) - start} points not measured")
            break
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for i, point in enumerate(chunk, start):
                try:
                    run = point.setup()
                    run()  # warm-up: module load, cuBLAS heuristics, workspace
                except (RuntimeError, ValueError, TypeError) as exc:
                    skipped.append(f"{point.sweep}#{i}: {str(exc).splitlines()[0][:160]}")
                    continue
                for rep in range(REPS):
                    flush.sum()
                    with record_function(f"rv#{i}#{rep}"):
                        run()
                del run
            torch.cuda.synchronize()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "trace.json")
            prof.export_chrome_trace(path)
            with open(path) as f:
                trace = json.load(f)
            if keep_trace and start == 0:
                with open(path, "rb") as f, gzip.open(keep_trace, "wb") as g:
                    shutil.copyfileobj(f, g)
        by_range = records_by_range(trace)
        for i, point in enumerate(chunk, start):
            rows += point_rows(i, point, [by_range[(i, r)] for r in range(REPS)
                                          if (i, r) in by_range])
        del trace, prof
        gc.collect()
        torch.cuda.empty_cache()
        log(f"[micro] points {start}..{start + len(chunk) - 1} ({chunk[0].sweep}..."
            f"{chunk[-1].sweep}): {len(rows)} rows so far, {time.time() - t0:.1f}s")
    return rows, skipped


@dataclass
class ChunkedRun:
    """What measure_chunks measured: points done and skipped (with the first reasons), and the
    rows written per kernel name."""
    done: int = 0
    skipped_points: int = 0
    skipped: list[str] = field(default_factory=list)
    kernels: dict[str, int] = field(default_factory=dict)


def measure_chunks(torch, points: list[Point], rows_path: str, chunk: int, deadline: float,
                   tag: str, annotate: Callable[[list[dict]], None] | None = None,
                   keep_trace: str | None = None) -> ChunkedRun:
    """measure() in chunks of `chunk` points for the sweep scripts that run outside `revati
    profile micro` (tools/profile/profile_*.py): each chunk's rows, point ids counted over all
    points and annotate(rows) applied, are appended to rows_path as JSON lines as soon as
    they are measured, so a lease's time limit or a failing chunk leaves what was measured.
    No chunk starts after `deadline` (time.time()). keep_trace: the first chunk's trace."""
    run = ChunkedRun()
    t_start = time.time()
    with open(rows_path, "w") as f:
        for start in range(0, len(points), chunk):
            if time.time() > deadline:
                run.skipped.append(f"points {start}..{len(points) - 1}: over --max-seconds")
                break
            part = points[start:start + chunk]
            t0 = time.time()
            try:
                rows, sk = measure(torch, part, log=lambda s: None,
                                   keep_trace=keep_trace if start == 0 else None)
            except Exception as exc:  # noqa: BLE001 - keep what was measured so far
                print(f"[{tag}] chunk {start} failed: {exc!r}", flush=True)
                run.skipped.append(f"chunk {start}: {exc!r}"[:300])
                break
            for r in rows:
                r["point"] += start
            if annotate:
                annotate(rows)
            for r in rows:
                run.kernels[r["kernel"]] = run.kernels.get(r["kernel"], 0) + 1
                f.write(json.dumps(r) + "\n")
            f.flush()
            run.done += len(part) - len(sk)
            run.skipped_points += len(sk)
            run.skipped += sk[:20]
            print(f"[{tag}] points {start}..{start + len(part) - 1}: {len(rows)} rows, "
                  f"{time.time() - t0:.1f}s, total {time.time() - t_start:.1f}s", flush=True)
    return run


def write_chunked_meta(torch, run: ChunkedRun, meta_path: str, planned: int, t_start: float,
                       tag: str, **what: object) -> None:
    """The provenance of a measure_chunks run (with `what` it measured) and its kernels, to
    meta_path; prints the kernels by row count."""
    prov = provenance(torch, " ".join(["python3", *sys.argv]))
    prov.update(points=run.done, planned_points=planned, skipped=run.skipped,
                skipped_points=run.skipped_points, seconds=round(time.time() - t_start, 1),
                reps=REPS, **what)
    with open(meta_path, "w") as f:
        json.dump({"provenance": prov, "kernels": run.kernels}, f, indent=1)
    print(f"[{tag}] {run.done} points measured, {run.skipped_points} skipped, "
          f"{time.time() - t_start:.1f}s", flush=True)
    for n, c in sorted(run.kernels.items(), key=lambda x: -x[1]):
        print(f"  {c:6d} {n[:200]}")


def provenance(torch, command: str) -> dict[str, object]:
    props = torch.cuda.get_device_properties(0)
    prov: dict[str, object] = {
        "gpu": props.name, "sm_count": props.multi_processor_count,
        "memory_bytes": props.total_memory, "compute_capability": f"{props.major}.{props.minor}",
        "torch": str(torch.__version__), "cuda": str(torch.version.cuda),
        "cudnn": int(torch.backends.cudnn.version()), "python": platform.python_version(),
        "host": platform.node(), "date": datetime.datetime.now(datetime.UTC).isoformat(),
        "command": command,
    }
    try:
        import pynvml
        pynvml.nvmlInit()
        prov["driver"] = str(pynvml.nvmlSystemGetDriverVersion())
        pynvml.nvmlShutdown()
    except (ImportError, OSError) as exc:  # pynvml missing or no NVML: say so, don't guess
        prov["driver"] = f"unknown ({exc})"
    return prov


def derived_spec(prov: dict[str, object], df) -> tuple[dict[str, object], dict[str, object]]:
    """The profile's hardware spec (datasheet peaks of the H200/H100 SXM class where the GPU is
    one, launch overhead from the profile) and what the profile measured of it."""
    kernels = df[df.op == Op.KERNEL]
    d2d = df[(df.op == Op.MEMCPY) & (df.copy_kind == CopyKind.D2D)]
    h2d = df[(df.op == Op.MEMCPY) & (df.copy_kind == CopyKind.H2D)]
    gemm = df[(df.op == Op.GEMM) & (df.dtype_a == DType.BF16)]
    measured = {
        "min_kernel_ns": int(kernels.duration_ns.min()),
        "p05_kernel_ns": int(kernels.duration_ns.quantile(0.05)),
        "d2d_bytes_per_s": float((2 * d2d.bytes / (d2d.duration_ns * 1e-9)).max()),
        "h2d_pinned_bytes_per_s": float((h2d.bytes / (h2d.duration_ns * 1e-9)).max()),
        "bf16_gemm_flops": float((2.0 * gemm.m * gemm.n * gemm.k
                                  / (gemm.duration_ns * 1e-9)).max()),
    }
    name = str(prov["gpu"])
    if "H200" not in name and "H100" not in name:
        raise SystemExit(f"no datasheet peaks known for {name}: add them to micro.derived_spec")
    spec = {
        "name": name, "sm_count": prov["sm_count"], "memory_bytes": prov["memory_bytes"],
        # NVIDIA H100/H200 SXM datasheet, dense (no sparsity).
        "peak_flops": {"fp32": 67e12, "tf32": 494.7e12, "fp16": 989.4e12, "bf16": 989.4e12,
                       "fp8": 1978.9e12},
        "hbm_bytes_per_s": 4.8e12 if "H200" in name else 3.35e12,
        "nvlink_bytes_per_s": 450e9,  # per direction, per GPU (900 GB/s both ways)
        "pcie_bytes_per_s": 64e9,     # PCIe 5.0 x16, one direction
        "launch_overhead_ns": measured["p05_kernel_ns"],
    }
    return spec, measured


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="revati profile micro", description=__doc__)
    add_arguments(parser)
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    return run(args, " ".join(["python -m revati.profile.micro", *argv]))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="hardware profile folder to write")
    parser.add_argument("--quick", action="store_true", help="three points per sweep axis")
    parser.add_argument("--only", default="",
                        help="comma-separated sweep name prefixes, measured in that order")
    parser.add_argument("--keep-trace", default=None, help="gzip the first Chrome trace here")
    parser.add_argument("--max-seconds", type=float, default=float("inf"),
                        help="start no new chunk of points after this long")


def run(args: argparse.Namespace, command: str) -> int:
    import pandas as pd
    import torch

    from revati.predict.hwprofile import HardwareProfile
    from revati.predict.roofline import RooflineSpec

    if not torch.cuda.is_available():
        print("revati profile micro: needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    prefixes = [p for p in args.only.split(",") if p]
    points = [p for p in sweeps(torch, args.quick)
              if not prefixes or any(p.sweep.startswith(x) for x in prefixes)]
    if prefixes:  # in the order asked for, so a time budget cuts the last-named sweeps
        points.sort(key=lambda p: next(i for i, x in enumerate(prefixes)
                                       if p.sweep.startswith(x)))
    print(f"[micro] {len(points)} points on {torch.cuda.get_device_name(0)}", flush=True)
    t0 = time.time()
    # SDPA explains every backend it declines; the sweep asks for one at a time on purpose.
    warnings.filterwarnings("ignore", category=UserWarning)
    rows, skipped = measure(torch, points, log=lambda s: print(s, flush=True),
                            keep_trace=args.keep_trace, max_seconds=args.max_seconds)
    df = pd.DataFrame(rows)
    prov = provenance(torch, command)
    prov.update(points=len(points), skipped=skipped, seconds=round(time.time() - t0, 1))
    spec, measured = derived_spec(prov, df)
    out = HardwareProfile(RooflineSpec.from_mapping(spec), prov, df, measured).write(args.out)
    print(f"[micro] {len(df)} rows, {len(skipped)} points skipped -> {out}", flush=True)
    for line in skipped[:20]:
        print("  skipped", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
