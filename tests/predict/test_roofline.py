"""The roofline fallback (native/predict/roofline.c through ctypes) against hand-computed values."""

from __future__ import annotations

import ctypes

import pytest

from revati.predict.features import (
    AttnShape,
    Coll,
    CopyKind,
    DType,
    Op,
    empty_launch_row,
    native,
)
from revati.predict.roofline import RooflineSpec

from .conftest import TEST_SPEC


def gemm(m, n, k, dt=DType.BF16):
    row = empty_launch_row(Op.GEMM)
    row.update(m=m, n=n, k=k, batch=1, dtype_a=dt, dtype_b=dt, dtype_c=dt)
    return row


def test_gemm_compute_bound(spec):
    # 2*4096^3 flops at 1e15/s = 137438.95 ns; 100.7 MB at 4e12 B/s is only 25 us.
    assert spec.roofline_ns(gemm(4096, 4096, 4096)) == 137439 + 2000


def test_gemm_memory_bound_decode(spec):
    # the 4096x4096 bf16 weight plus two 8x4096 activations: 33685504 B / 4e12 B/s
    assert spec.roofline_ns(gemm(8, 4096, 4096)) == 8421 + 2000


def test_fp32_gemm_uses_the_fp32_peak(spec):
    assert spec.roofline_ns(gemm(4096, 4096, 4096, DType.F32)) == round(2 * 4096**3 / 50e3) + 2000


@pytest.mark.parametrize("kind,expected_ns", [(CopyKind.D2D, 500_000), (CopyKind.H2D, 20_000_000),
                                              (CopyKind.D2H, 20_000_000),
                                              (CopyKind.P2P, 2_500_000)])
def test_copies(spec, kind, expected_ns):
    row = empty_launch_row(Op.MEMCPY)
    row.update(bytes=10**9, copy_kind=kind)
    assert spec.roofline_ns(row) == expected_ns + 2000


def test_ring_allreduce_and_single_rank(spec):
    row = empty_launch_row(Op.COLLECTIVE)
    row.update(coll=Coll.ALLREDUCE, bytes=10**9, nranks=8)
    assert spec.roofline_ns(row) == 4_375_000 + 2000  # 2 (n-1)/n bytes over NVLink
    row.update(nranks=1)
    assert spec.roofline_ns(row) == 2000


def test_unprofiled_kernel_streams_16_bytes_per_thread(spec):
    row = empty_launch_row(Op.KERNEL)
    row.update(kernel="k", grid_x=100, block_x=256)
    assert spec.roofline_ns(row) == 102 + 2000  # 25600 threads x 16 B / 4e12 B/s


def test_attention_roofline_counts_causal_pairs(spec):
    lib = native()
    vec = (ctypes.c_double * len(spec.vector()))(*spec.vector())
    decode = AttnShape(1, 1, 1024, 32, 8, 128)
    # reads q and o (2 x 32 heads) and k, v (2 x 1024 x 8 heads) of 128 x 2 bytes
    assert lib.rv_attention_roofline_ns(ctypes.byref(decode), vec) == 1053 + 2000
    prefill = AttnShape(1, 4096, 4096, 32, 8, 128)
    pairs = 4096 * 4096 - 4096 * 4095 // 2  # causal: 1 + 2 + ... + 4096
    flops_ns = 4 * 32 * pairs * 128 / 1e6
    assert lib.rv_attention_roofline_ns(ctypes.byref(prefill), vec) == round(flops_ns) + 2000


def test_spec_flat_file_round_trip(spec, spec_file):
    again = RooflineSpec.from_flat_file(spec_file)
    assert again.vector() == spec.vector()
    assert RooflineSpec.from_mapping(spec.as_mapping()).vector() == spec.vector()


def test_spec_missing_key_is_an_error():
    partial = {k: v for k, v in TEST_SPEC.items() if k != "hbm_bytes_per_s"}
    with pytest.raises(ValueError, match="hbm_bytes_per_s"):
        RooflineSpec.from_mapping(partial)
