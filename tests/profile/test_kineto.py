"""Launch records out of a Kineto Chrome trace, joined to the profiler range that launched them."""

from __future__ import annotations

from revati.predict.features import LAUNCH_COLUMNS
from revati.predict.hwprofile import CONTEXT_COLUMNS
from revati.profile.kineto import records_by_range
from revati.profile.micro import Point, gemm_call, point_rows


def X(cat, name, ts, dur, tid, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "tid": tid, "args": args}


TRACE = {"traceEvents": [
    X("user_annotation", "rv#7#0", 100, 50, 1),
    X("user_annotation", "rv#7#1", 200, 50, 1),
    X("user_annotation", "unrelated", 300, 50, 1),
    X("cuda_runtime", "cudaLaunchKernel", 110, 5, 1, correlation=1),
    X("cuda_driver", "cuLaunchKernelEx", 120, 5, 1, correlation=2),
    X("cuda_runtime", "cudaLaunchKernel", 210, 5, 1, correlation=3),
    X("cuda_runtime", "cudaLaunchKernel", 220, 5, 1, correlation=4),
    X("cuda_runtime", "cudaMemcpyAsync", 310, 5, 1, correlation=5),  # outside any rv range
    X("kernel", "nvjet_a", 1000, 12.3456, 7, correlation=1, grid=[4, 9, 1], block=[384, 1, 1],
      **{"shared memory": 1024}),
    X("kernel", "splitKreduce", 1013, 1.5, 7, correlation=2, grid=[24, 1, 1], block=[32, 16, 1]),
    X("kernel", "nvjet_a", 2000, 12.0, 7, correlation=3, grid=[4, 9, 1], block=[384, 1, 1],
      **{"shared memory": 1024}),
    X("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 2013, 2.0, 7, correlation=4, bytes=4096),
    X("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 3000, 9.0, 7, correlation=5, bytes=1),
]}


def test_records_are_joined_to_their_range_in_gpu_order():
    by_range = records_by_range(TRACE)
    assert set(by_range) == {(7, 0), (7, 1)}
    first = by_range[(7, 0)]
    assert [r.name for r in first] == ["nvjet_a", "splitKreduce"]
    assert (first[0].duration_ns, first[0].grid, first[0].block, first[0].shared_bytes) == \
        (12346, (4, 9, 1), (384, 1, 1), 1024)
    copy = by_range[(7, 1)][1]
    assert (copy.op, copy.bytes, copy.copy_kind) == (2, 4096, 1)


def test_point_rows_take_medians_and_add_the_library_call():
    by_range = records_by_range(TRACE)
    point = Point("gemm_bf16", lambda: None, gemm_call(8, 4096, 4096, 3, 3))
    # repetition 1 launched a different sequence (kernel + copy): both have length 2, so the
    # per-position median mixes them; the call row sums each repetition's records
    rows = point_rows(7, point, [by_range[(7, 0)], by_range[(7, 0)], by_range[(7, 1)]])
    kernels, call = rows[:-1], rows[-1]
    assert [r["position"] for r in kernels] == [0, 1]
    assert kernels[0]["duration_ns"] == 12346 and kernels[0]["kernel"] == "nvjet_a"
    assert (call["op"], call["m"], call["n"], call["k"], call["trans_a"]) == (1, 4096, 8, 4096, 1)
    assert call["duration_ns"] == 12346  # the first kernel: the one the shim tags
    assert call["position"] == -1 and call["reps"] == 3
    # every column a profile stores, so `revati profile micro` can write its rows
    for row in rows:
        assert set(LAUNCH_COLUMNS + CONTEXT_COLUMNS) <= set(row)
