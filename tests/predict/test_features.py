"""The Python mirror of struct rv_launch, and the feature vectors the C library derives."""

from __future__ import annotations

import ctypes
import math
import subprocess

from revati.native import NATIVE_DIR
from revati.predict.families import family_of
from revati.predict.features import (
    LAUNCH_COLUMNS,
    MOE_SHAPE_OP,
    DType,
    Op,
    RvLaunch,
    empty_launch_row,
    feature_matrix,
    feature_names,
    to_launch,
)

FIELDS = ["op", "device", "kernel", "kernel_hash", "grid", "block", "shared_bytes", "m", "n",
          "k", "batch", "dtype_a", "dtype_b", "dtype_c", "trans_a", "trans_b", "bytes",
          "copy_kind", "coll", "nranks", "arg_max", "arg_sum"]


def test_struct_layout_matches_the_c_header(tmp_path):
    """Every field's offset and the size agree with what a C compiler makes of predict.h."""
    src = tmp_path / "layout.c"
    prints = "".join(f'printf("%zu\\n", offsetof(struct rv_launch, {f}));' for f in FIELDS)
    src.write_text("#include <stddef.h>\n#include <stdio.h>\n#include \"predict.h\"\n"
                   f"int main(void) {{ {prints} printf(\"%zu\\n\", sizeof(struct rv_launch)); }}\n")
    exe = tmp_path / "layout"
    subprocess.run(["cc", "-I", str(NATIVE_DIR / "predict"), str(src), "-o", str(exe)], check=True)
    out = [int(x) for x in subprocess.run([str(exe)], capture_output=True, text=True,
                                          check=True).stdout.split()]
    assert out[:-1] == [getattr(RvLaunch, f).offset for f in FIELDS]
    assert out[-1] == ctypes.sizeof(RvLaunch)


def test_profile_row_round_trips_into_the_struct():
    row = empty_launch_row(Op.GEMM)
    row.update(m=4096, n=8, k=14336, batch=1, dtype_a=DType.BF16, trans_a=1)
    launch = to_launch(row)
    assert (launch.op, launch.m, launch.n, launch.k, launch.trans_a) == (1, 4096, 8, 14336, 1)
    assert launch.kernel is None
    assert set(row) == set(LAUNCH_COLUMNS)


def test_gemm_features_hold_shape_and_log_roofline(spec):
    row = empty_launch_row(Op.GEMM)
    row.update(m=1024, n=1024, k=1024, batch=1, dtype_a=DType.BF16, dtype_b=DType.BF16,
               dtype_c=DType.BF16)
    names = feature_names(Op.GEMM)
    x = dict(zip(names, feature_matrix([row], spec.vector())[0], strict=True))
    assert (x["m"], x["n"], x["k"]) == (1024, 1024, 1024)
    assert x["log2_flops"] == math.log2(2 * 1024**3)
    assert x["log_roofline_ns"] == math.log(spec.roofline_ns(row))


def test_kernel_id_outside_the_vocabulary_is_missing(spec):
    row = empty_launch_row(Op.KERNEL)
    row.update(kernel="void at::native::vectorized_elementwise_kernel<4>()", grid_x=64,
               block_x=128)
    known, unknown = feature_matrix([row, row], spec.vector(), [3, -1])
    names = feature_names(Op.KERNEL)
    assert names[0] == "kernel_id" and known[0] == 3 and math.isnan(unknown[0])
    assert dict(zip(names, known, strict=True))["blocks"] == 64


def test_families_by_kernel_name():
    assert family_of(Op.GEMM, None) == "gemm"
    assert family_of(Op.MEMCPY, None) == "memcpy"
    assert family_of(Op.KERNEL, "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma")\
        == "attention"
    assert family_of(Op.KERNEL, "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_splitK_TNT") == "gemm_kernel"
    assert family_of(Op.KERNEL, "void at::native::(anonymous namespace)::"
                                "vectorized_layer_norm_kernel<c10::BFloat16>") == "norm"
    assert family_of(Op.KERNEL, "void at::native::reduce_kernel<512, 1>") == "reduce"
    assert family_of(Op.KERNEL, "some_custom_kernel") == "misc"
    assert family_of(Op.KERNEL, None) is None


def test_every_feature_vector_fits_the_buffers_python_passes():
    from revati.predict.features import ATTENTION_MIX_OP, ATTENTION_SHAPE_OP, NFEAT_MAX

    ops = [*Op, ATTENTION_SHAPE_OP, MOE_SHAPE_OP, ATTENTION_MIX_OP]
    assert max(len(feature_names(op)) for op in ops) <= NFEAT_MAX


def test_a_mixed_step_is_summed_by_group_and_its_roofline_counts_every_pair(spec):
    """Decodes (one query token) and longer queries are summed apart; rows without queries
    are skipped; the roofline's FLOPs are the exact causal pairs, not a uniform shape's."""
    from revati.predict.features import (
        ATTENTION_MIX_OP,
        attention_mix_feature_matrix,
        is_mixed,
        to_mix,
    )

    row = {"q_lens": [1, 1, 0, 512, 256], "kv_lens": [1000, 3000, 77, 512, 1280],
           "heads": 32, "kv_heads": 8, "head_dim": 128}
    m = to_mix(row)
    assert (m.decodes, m.prefills, m.heads, m.kv_heads, m.head_dim) == (2, 2, 32, 8, 128)
    assert (m.dec_kv, m.dec_kv_max, m.pre_q, m.pre_q_max, m.pre_kv) == (4000, 3000, 768, 512,
                                                                       1792)
    pairs = 512 * 512 - 512 * 511 / 2 + 256 * 1280 - 256 * 255 / 2
    assert m.pre_pairs == pairs
    assert is_mixed(row) and not is_mixed(dict(row, q_lens=[1, 1, 0, 1, 1]))
    x = attention_mix_feature_matrix([row], spec.vector(), [3])[0]
    names = feature_names(ATTENTION_MIX_OP)
    assert len(x) == len(names) and names[-1] == "log_roofline_ns"
    flops = 4 * 32 * (4000 + pairs) * 128
    assert x[names.index("log2_flops")] == math.log2(flops)
    assert x[0] == 3 and x[names.index("decodes")] == 2


def test_argument_sizes_are_kernel_features_and_unknown_is_missing(spec):
    row = empty_launch_row(Op.KERNEL)
    row.update(kernel="void at::native::vectorized_layer_norm_kernel<c10::BFloat16>()",
               grid_x=64, block_x=32)
    unknown = feature_matrix([row], spec.vector(), [0])[0]
    row.update(arg_max=4096, arg_sum=4096 + 64)
    known = feature_matrix([row], spec.vector(), [0])[0]
    names = feature_names(Op.KERNEL)
    x, u = dict(zip(names, known, strict=True)), dict(zip(names, unknown, strict=True))
    assert x["log2_arg_max"] == 12 and x["log2_arg_sum"] == math.log2(4160)
    # one block per row of 4,096: the work is blocks x size
    assert x["log2_blocks_arg_max"] == 6 + 12
    assert all(math.isnan(u[f]) for f in ("log2_arg_max", "log2_arg_sum", "log2_blocks_arg_max"))
    assert names[-1] == "log_roofline_ns"


def test_argument_sizes_count_small_integers_only():
    """4-byte values in [1, 2^24) and 8-byte values in [1, 2^31): floats, negative values,
    zeros, pointers and structures are not sizes."""

    class Philox(ctypes.Structure):  # random-number state: a per-call offset inside
        _fields_ = [("seed", ctypes.c_uint64), ("offset", ctypes.c_uint64)]

    values = [ctypes.c_int(4096), ctypes.c_float(1e-6), ctypes.c_int(-1), ctypes.c_int(0),
              ctypes.c_int64(128256), ctypes.c_int64(0x7F12_3456_7000), ctypes.c_uint8(7),
              ctypes.c_int64(14336), Philox(12345, 40)]
    assert _arg_sizes(b"_Z6kernelPfiflflhlS_", _dims(1), _dims(128), values) == (
        128256, 4096 + 128256 + 14336)


def test_concatenation_sizes_come_from_its_input_metadata():
    """torch.cat's kernel carries its inputs' element counts in a structure (PyTorch's
    CatArrInputTensorMetadata, 128 inputs at most): the counts of the grid_y inputs it copies
    are the sizes, the entries past them (uninitialised on the host) and the scalar
    arguments are not."""

    n = 128

    class Metadata(ctypes.Structure):
        _fields_ = [("input", ctypes.c_uint64 * n), ("offset", ctypes.c_uint32 * n),
                    ("dim_size", ctypes.c_uint32 * n), ("elements", ctypes.c_uint32 * n),
                    ("contiguous", ctypes.c_bool * n), ("strides", ctypes.c_uint32 * 8)]

    meta = Metadata()
    meta.elements[:4] = [3 << 20, 1 << 20, 5000, 77]  # two inputs copied, two stale entries
    assert ctypes.sizeof(meta) == 2720
    values = [ctypes.c_uint64(0x7F00_0000_0000), meta, ctypes.c_int(2), ctypes.c_uint32(64)]
    name = (b"_ZN2at6native12_GLOBAL__N_130CatArrayBatchedCopy_vectorizedINS1_10OpaqueTypeILj2E"
            b"EEjLi3ELi128ELi1ELi16ELi8EEEvPcNS1_25CatArrInputTensorMetadataIT_T0_XT2_EXT3_EEENS1"
            b"_16TensorSizeStrideIS8_Lj4EEEiS8_")
    assert _arg_sizes(name, _dims(264, 2), _dims(128), values) == (3 << 20, 4 << 20)
    # Another kernel with the same parameters: only its scalar arguments are sizes.
    assert _arg_sizes(b"_Z4copy", _dims(264, 2), _dims(128), values) == (64, 66)


def _dims(x, y=1, z=1):
    return (ctypes.c_uint32 * 3)(x, y, z)


def _params(values):
    """A kernel's parameters as the shim passes them: sizes and pointers to the values."""
    sizes = (ctypes.c_uint16 * len(values))(*[ctypes.sizeof(v) for v in values])
    ptrs = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
    return sizes, ptrs


def _arg_sizes(name, grid, block, values):
    """rv_arg_sizes of a launch of kernel `name`: (largest size, sum of sizes)."""
    from revati.predict.features import native

    sizes, ptrs = _params(values)
    mx, sm = ctypes.c_int64(), ctypes.c_int64()
    native().rv_arg_sizes(native().rv_arg_layout(name), grid, block, len(values), sizes, ptrs,
                          ctypes.byref(mx), ctypes.byref(sm))
    return mx.value, sm.value


def _tensor_info(index_type, sizes):
    """PyTorch's TensorInfo<T, IndexType>: data, sizes[25], strides[25], dims."""
    class TensorInfo(ctypes.Structure):
        _fields_ = [("data", ctypes.c_uint64), ("sizes", index_type * 25),
                    ("strides", index_type * 25), ("dims", ctypes.c_int)]

    info = TensorInfo(0x7F00_0000_0000, dims=len(sizes))
    info.sizes[:len(sizes)] = sizes
    info.sizes[len(sizes):] = [0xABCD] * (25 - len(sizes))  # what the stack held
    return info


def test_embedding_lookup_sizes_come_from_its_tensor_infos():
    """index_select (an embedding lookup) launches a grid sized by the row width; the rows
    it copies are the indices' count (TensorInfo parameter 2) and the row width the output's
    element count, its select dimension reduced to 1 (parameter 0): rows x width is the
    largest size, the scalar sizes still add to the sum."""
    for index_type, size in ((ctypes.c_uint32, 216), (ctypes.c_uint64, 416)):
        out = _tensor_info(index_type, [1, 4096])
        src = _tensor_info(index_type, [128256, 4096])
        idx = _tensor_info(index_type, [37])
        assert ctypes.sizeof(out) == size
        values = [out, src, idx, ctypes.c_int(0), ctypes.c_int(0), ctypes.c_uint32(4096),
                  ctypes.c_int64(128256)]
        name = (b"_ZN2at6native12_GLOBAL__N_121indexSelectSmallIndexIN3c108BFloat16EljLi2ELi2"
                b"ELin2EEEvNS_4cuda6detail10TensorInfoIT_T1_EENS7_IKS8_S9_EENS7_IKT0_S9_EEiiS9_l")
        assert _arg_sizes(name, _dims(32), _dims(128), values) == (37 * 4096,
                                                                   37 * 4096 + 4096 + 128256)
        # the same parameters under another kernel's name: only the scalar sizes
        assert _arg_sizes(b"_Z4copy", _dims(32), _dims(128), values) == (128256, 4096 + 128256)


def test_reduction_sizes_come_from_its_config():
    """reduce_kernel's one parameter is a ReduceOp whose ReduceConfig follows ops and an
    identity of varying size; it is found by its block dimensions, the launch's, and gives
    num_inputs x num_outputs (elements read) and num_inputs + num_outputs."""
    class ReduceOp(ctypes.Structure):
        _fields_ = [("ops_and_ident", ctypes.c_float * 3), ("config", ctypes.c_int32 * 14),
                    ("rest", ctypes.c_uint64 * 40)]

    op = ReduceOp()
    op.ops_and_ident[:] = [2.0, 0.0, 4.0]
    #            bytes inputs outputs step_in step_out ctas  in_mult  out_mult  bw  bh  threads
    op.config[:] = [4, 128256, 64, 1, 1, 1, 0, 1, 0, 1, 0, 32, 16, 512]
    name = (b"_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_7SumOpsIffEEjfLi4ELi4EE"
            b"EEEvT1_")
    assert _arg_sizes(name, _dims(1, 64), _dims(32, 16), [op]) == (128256 * 64, 128256 + 64)
    # a launch whose block is not the config's: nothing is taken for it
    assert _arg_sizes(name, _dims(1, 64), _dims(512), [op]) == (0, 0)


def test_fused_moe_gemm_dims_come_from_its_arguments():
    """vLLM's fused_moe_kernel as Triton compiles it: 7 pointers (those passed as None are
    dropped), then N, K, EM, num_valid_tokens and strides as 32-bit integers, then Triton's
    scratch pointers. m is the routed (token, expert) pairs, n and k the GEMM's widths; any
    other kernel, or another layout, gives nothing."""
    from revati.predict.features import native

    ints = [1536, 2048, 10112, 16 * 8, 2048, 1, 3145728, 1, 2048, 1536, 1]
    values = [ctypes.c_uint64(0x7F00_0000_0000 + i) for i in range(7)]
    values += [ctypes.c_uint32(v) for v in ints] + [ctypes.c_uint64(0), ctypes.c_uint64(0)]

    def dims(name, vals):
        sizes, ptrs = _params(vals)
        m, n, k = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
        ok = native().rv_moe_dims(native().rv_arg_layout(name), len(vals), sizes, ptrs,
                                  ctypes.byref(m), ctypes.byref(n), ctypes.byref(k))
        return bool(ok & 0xFF), (m.value, n.value, k.value)

    assert dims(b"fused_moe_kernel", values) == (True, (128, 1536, 2048))
    assert dims(b"fused_moe_kernel_gptq_awq", values)[0] is False
    assert dims(b"fused_moe_kernel", [ctypes.c_uint32(3), *values])[0] is False


def test_moe_roofline_reads_the_experts_the_tokens_touch(spec):
    """Uniform routing: 1 token touches k of E experts, many tokens all of them; a decode
    step's cost is the touched experts' weights, not the tokens' FLOPs."""
    from revati.predict.features import moe_feature_matrix, moe_roofline_ns

    def launch(tokens):
        row = empty_launch_row(Op.KERNEL)
        row.update(kernel="fused_moe_kernel", m=tokens * 8, n=1536, k=2048, moe_experts=128,
                   moe_top_k=8, grid_x=256, block_x=128)
        return row

    names = feature_names(MOE_SHAPE_OP)
    one, many = (dict(zip(names, x, strict=True))
                 for x in moe_feature_matrix([launch(1), launch(4096)], spec.vector()))
    assert one["touched_experts"] == 8 and math.isclose(many["touched_experts"], 128)
    weights = 1536 * 2048 * 2 / spec.values["hbm_bytes_per_s"] * 1e9  # ns per expert
    t1 = moe_roofline_ns(launch(1), spec.vector()) - spec.values["launch_overhead_ns"]
    assert math.isclose(t1, 8 * weights, rel_tol=0.01)
    assert moe_roofline_ns(launch(16), spec.vector()) > 8 * t1


def test_split_k_reduction_sizes_come_from_its_params():
    """cuBLASLt's split-K reduction launches one block per output tile whatever the split
    count; its cublasSplitKParams (alpha, beta, m, n, leading dimensions, batch, m x n,
    splits) give the partial elements it sums, m x n x splits."""
    k_4096 = (ctypes.c_int32 * 15)(0x3F800000, 0, 768, 32, 768, 768, 768, 768, 1, 24576, 3,
                                   0, 0, 0, 1)  # as the emulated cuBLAS launches 768 x 32
    k_19072 = (ctypes.c_int32 * 15)(*k_4096)
    k_19072[10] = 7
    pointers = [ctypes.c_uint64(0x7F00_0000_0000 + i) for i in range(20)]
    name = (b"_ZN8cublasLt19splitKreduce_kernelILi32ELi16EifK13__nv_bfloat16EEvNS_18cublasSplit"
            b"KParamsIfEE")
    assert _arg_sizes(name, _dims(24, 2), _dims(32), [k_4096, *pointers]) == (768 * 32 * 3,
                                                                              24576 + 3)
    assert _arg_sizes(name, _dims(24, 2), _dims(32), [k_19072, *pointers])[0] == 768 * 32 * 7
    k_19072[9] = 1  # m x n does not check out: not this layout
    assert _arg_sizes(name, _dims(24, 2), _dims(32), [k_19072, *pointers]) == (0, 0)
