"""The launch features shared by the emulator and the profiler (mirror of native/predict/predict.h).

What the device shim sees at a launch is one `struct rv_launch`; a real-GPU profile stores one
row per launch (or per library call) with exactly those fields as columns (LAUNCH_COLUMNS). The
numeric feature vectors the models consume are derived from a launch by the C library itself
(`rv_features`), so training (here, through ctypes) and emulation (in the shim) use one
implementation and cannot drift apart.
"""

from __future__ import annotations

import ctypes
import enum
from collections.abc import Callable, Iterable, Mapping
from functools import cache

import numpy as np

from revati.native import library

NFEAT_MAX = 24


class Op(enum.IntEnum):
    KERNEL = 0
    GEMM = 1
    MEMCPY = 2
    MEMSET = 3
    COLLECTIVE = 4


class DType(enum.IntEnum):
    NONE = 0
    F32 = 1
    F16 = 2
    BF16 = 3
    FP8_E4M3 = 4
    FP8_E5M2 = 5
    I8 = 6
    I32 = 7
    F64 = 8


class CopyKind(enum.IntEnum):
    H2D = 1
    D2H = 2
    D2D = 3
    H2H = 4
    P2P = 5


class Coll(enum.IntEnum):
    ALLREDUCE = 1
    ALLGATHER = 2
    REDUCESCATTER = 3
    BROADCAST = 4
    REDUCE = 5
    ALLTOALL = 6
    SEND = 7
    RECV = 8


class Source(enum.IntEnum):
    MODEL = 0
    ROOFLINE = 1
    FIXED = 2


class RvLaunch(ctypes.Structure):
    """Byte-for-byte `struct rv_launch` (predict.h)."""

    _fields_ = [
        ("op", ctypes.c_int),
        ("device", ctypes.c_int),
        ("kernel", ctypes.c_char_p),
        ("kernel_hash", ctypes.c_uint64),
        ("grid", ctypes.c_uint32 * 3),
        ("block", ctypes.c_uint32 * 3),
        ("shared_bytes", ctypes.c_uint32),
        ("m", ctypes.c_int64),
        ("n", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("batch", ctypes.c_int64),
        ("dtype_a", ctypes.c_int),
        ("dtype_b", ctypes.c_int),
        ("dtype_c", ctypes.c_int),
        ("trans_a", ctypes.c_int),
        ("trans_b", ctypes.c_int),
        ("bytes", ctypes.c_int64),
        ("copy_kind", ctypes.c_int),
        ("coll", ctypes.c_int),
        ("nranks", ctypes.c_int),
        ("arg_max", ctypes.c_int64),
        ("arg_sum", ctypes.c_int64),
    ]


class AttnShape(ctypes.Structure):
    """`struct rv_attn_shape` (predict/predict_int.h): what the attention-by-shape models take."""

    _fields_ = [(f, ctypes.c_int64) for f in ("batch", "q_len", "kv_len", "heads", "kv_heads",
                                              "head_dim")]


class AttnMix(ctypes.Structure):
    """`struct rv_attn_mix` (predict/predict_int.h): a step's decodes and prefill chunks, summed
    by group."""

    _fields_ = ([(f, ctypes.c_int64) for f in ("decodes", "prefills", "heads", "kv_heads",
                                               "head_dim")]
                + [(f, ctypes.c_double) for f in ("dec_kv", "dec_kv_max", "pre_q", "pre_q_max",
                                                  "pre_kv", "pre_pairs")])


ATTENTION_SHAPE_OP = 100  # feature class and index op of the attention-by-shape models
MOE_SHAPE_OP = 101  # and of the fused-MoE GEMMs predicted from the model's routing
ATTENTION_MIX_OP = 102  # and of attention over decodes and prefill chunks in one launch
# Profile columns holding the attention shape, in AttnShape order.
ATTENTION_COLUMNS = ["attn_batch", "q_len", "kv_len", "heads", "kv_heads", "head_dim"]


# Profile columns holding the served model's routing (experts, experts per token) of a
# fused-MoE launch, whose GEMM is in the launch columns m (routed pairs), n and k; 0 elsewhere.
MOE_COLUMNS = ["moe_experts", "moe_top_k"]


# Profile table columns holding the launch, one per scalar of struct rv_launch.
LAUNCH_COLUMNS = [
    "op", "kernel", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
    "shared_bytes", "m", "n", "k", "batch", "dtype_a", "dtype_b", "dtype_c", "trans_a",
    "trans_b", "bytes", "copy_kind", "coll", "nranks", "arg_max", "arg_sum",
]
_INT_FIELDS = ["m", "n", "k", "batch", "dtype_a", "dtype_b", "dtype_c", "trans_a", "trans_b",
               "bytes", "copy_kind", "coll", "nranks", "arg_max", "arg_sum"]
# Kernel-argument sizes (struct rv_launch arg_max/arg_sum) a real-GPU profile does not see:
# -1 (unknown, a missing feature) until `revati profile args` fills them from an emulated
# replay of the same program.
ARG_COLUMNS = ["arg_max", "arg_sum"]
UNKNOWN_ARGS = -1


def empty_launch_row(op: Op) -> dict[str, object]:
    """A profile row with every launch column set to its neutral value."""
    row: dict[str, object] = {c: 0 for c in LAUNCH_COLUMNS}
    row.update(op=int(op), kernel="", grid_x=1, grid_y=1, grid_z=1, block_x=1, block_y=1,
               block_z=1, **dict.fromkeys(ARG_COLUMNS, UNKNOWN_ARGS))
    return row


def to_launch(row: Mapping[str, object]) -> RvLaunch:
    """The C struct for one profile row (a dict or a pandas row)."""
    name = row.get("kernel") or None
    launch = RvLaunch(op=int(row["op"]), device=0,
                      kernel=name.encode() if isinstance(name, str) else None)
    launch.grid[:] = [int(row[c]) for c in ("grid_x", "grid_y", "grid_z")]
    launch.block[:] = [int(row[c]) for c in ("block_x", "block_y", "block_z")]
    launch.shared_bytes = int(row["shared_bytes"])
    for f in _INT_FIELDS:
        setattr(launch, f, int(row[f]))
    return launch


@cache
def native() -> ctypes.CDLL:
    """librevati_predict.so (built by `pip install -e .`), with its prototypes declared."""
    lib = ctypes.CDLL(str(library("librevati_predict.so")))
    lib.rv_spec_key.restype = ctypes.c_char_p
    lib.rv_spec_key.argtypes = [ctypes.c_int]
    lib.rv_spec_len.restype = ctypes.c_int
    lib.rv_feature_name.restype = ctypes.c_char_p
    lib.rv_feature_name.argtypes = [ctypes.c_int, ctypes.c_int]
    dvec = ctypes.POINTER(ctypes.c_double)
    lib.rv_roofline_ns.restype = ctypes.c_int64
    lib.rv_roofline_ns.argtypes = [ctypes.POINTER(RvLaunch), dvec]
    lib.rv_features.restype = ctypes.c_int
    lib.rv_features.argtypes = [ctypes.POINTER(RvLaunch), dvec, ctypes.c_int, dvec]
    lib.rv_predict_ns.restype = ctypes.c_int64
    lib.rv_predict_ns.argtypes = [ctypes.POINTER(RvLaunch), ctypes.POINTER(ctypes.c_int)]
    shape = ctypes.POINTER(AttnShape)
    lib.rv_attention_roofline_ns.restype = ctypes.c_int64
    lib.rv_attention_roofline_ns.argtypes = [shape, dvec]
    lib.rv_attention_features.restype = ctypes.c_int
    lib.rv_attention_features.argtypes = [shape, dvec, ctypes.c_int, dvec]
    lib.rv_predict_attention_ns.restype = ctypes.c_int64
    lib.rv_predict_attention_ns.argtypes = [ctypes.POINTER(RvLaunch), shape,
                                            ctypes.POINTER(ctypes.c_int)]
    mix = ctypes.POINTER(AttnMix)
    i64s = ctypes.POINTER(ctypes.c_int64)
    lib.rv_attention_mix.restype = None
    lib.rv_attention_mix.argtypes = [ctypes.c_int, i64s, i64s, ctypes.c_int, ctypes.c_int,
                                     ctypes.c_int, mix]
    lib.rv_attention_mix_roofline_ns.restype = ctypes.c_int64
    lib.rv_attention_mix_roofline_ns.argtypes = [mix, dvec]
    lib.rv_attention_mix_features.restype = ctypes.c_int
    lib.rv_attention_mix_features.argtypes = [mix, dvec, ctypes.c_int, dvec]
    launch = ctypes.POINTER(RvLaunch)
    lib.rv_moe_roofline_ns.restype = ctypes.c_int64
    lib.rv_moe_roofline_ns.argtypes = [launch, ctypes.c_int, ctypes.c_int, dvec]
    lib.rv_moe_features.restype = ctypes.c_int
    lib.rv_moe_features.argtypes = [launch, ctypes.c_int, ctypes.c_int, dvec, dvec]
    lib.rv_predict_totals.restype = None
    lib.rv_predict_totals.argtypes = [ctypes.c_int64 * 3]
    lib.rv_kernel_hash.restype = ctypes.c_uint64
    lib.rv_kernel_hash.argtypes = [ctypes.c_char_p]
    lib.rv_predict_by_batch.restype = ctypes.c_bool
    lib.rv_predict_by_batch.argtypes = [ctypes.POINTER(RvLaunch)]
    lib.rv_attention_batch.restype = None
    lib.rv_attention_batch.argtypes = [ctypes.c_int, i64s, i64s, ctypes.c_int, ctypes.c_int,
                                       ctypes.c_int]
    return lib


def spec_keys() -> list[str]:
    """Hardware-spec keys in the order the C library takes them as a vector."""
    lib = native()
    return [lib.rv_spec_key(i).decode() for i in range(lib.rv_spec_len())]


def feature_names(op: int) -> list[str]:
    lib = native()
    names = []
    while (name := lib.rv_feature_name(int(op), len(names))) is not None:
        names.append(name.decode())
    return names


def _spec_array(spec_vector: Iterable[float]) -> ctypes.Array:
    values = list(spec_vector)
    return (ctypes.c_double * len(values))(*values)


def feature_matrix(rows: Iterable[Mapping[str, object]], spec_vector: Iterable[float],
                   kernel_ids: Iterable[int] | None = None) -> np.ndarray:
    """Feature vectors (one row per launch) as the C predictor computes them.

    kernel_ids: each kernel's index in its family's vocabulary (only read for Op.KERNEL rows;
    a negative id means "not in the vocabulary" and becomes NaN, as in the C predictor).
    """
    lib = native()
    spec = _spec_array(spec_vector)
    rows = list(rows)
    ids = list(kernel_ids) if kernel_ids is not None else [-1] * len(rows)
    out = (ctypes.c_double * NFEAT_MAX)()
    result = []
    width = None
    for row, kid in zip(rows, ids, strict=True):
        launch = to_launch(row)
        n = lib.rv_features(ctypes.byref(launch), spec, int(kid), out)
        if n < 0:
            raise ValueError(f"no features for op {launch.op}")
        if width is not None and n != width:
            raise ValueError("feature_matrix needs rows of one op class")
        width = n
        vec = list(out[:n])
        if launch.op == Op.KERNEL and kid < 0:
            vec[0] = float("nan")
        result.append(vec)
    return np.asarray(result, dtype=np.float64).reshape(len(result), width or 0)


def roofline_ns(row: Mapping[str, object], spec_vector: Iterable[float]) -> int:
    """Roofline duration (ns, launch overhead included) of one launch."""
    launch = to_launch(row)
    return int(native().rv_roofline_ns(ctypes.byref(launch), _spec_array(spec_vector)))


def to_shape(row: Mapping[str, object]) -> AttnShape:
    return AttnShape(*(int(row[c]) for c in ATTENTION_COLUMNS))


def _by_kernel(features: Callable[..., int], structs: Iterable[ctypes.Structure],
               spec_vector: Iterable[float], kernel_ids: Iterable[int]) -> np.ndarray:
    """Feature vectors of a C features function taking (struct, spec, kernel id, out), with
    the kernel id missing (NaN) for a kernel outside the vocabulary, as in the C predictor."""
    spec = _spec_array(spec_vector)
    out = (ctypes.c_double * NFEAT_MAX)()
    result = []
    for struct, kid in zip(structs, kernel_ids, strict=True):
        vec = list(out[:features(ctypes.byref(struct), spec, int(kid), out)])
        if kid < 0:
            vec[0] = float("nan")
        result.append(vec)
    return np.asarray(result, dtype=np.float64)


def attention_feature_matrix(rows: Iterable[Mapping[str, object]],
                             spec_vector: Iterable[float],
                             kernel_ids: Iterable[int]) -> np.ndarray:
    """Attention-by-shape feature vectors as the C predictor computes them."""
    return _by_kernel(native().rv_attention_features, map(to_shape, rows), spec_vector,
                      kernel_ids)


def to_mix(row: Mapping[str, object]) -> AttnMix:
    """The C summary of a row's per-sequence lengths (q_lens, kv_lens: one step's)."""
    q, kv = list(row["q_lens"]), list(row["kv_lens"])  # type: ignore[call-overload]
    n, mix = len(q), AttnMix()
    native().rv_attention_mix(n, (ctypes.c_int64 * n)(*q), (ctypes.c_int64 * n)(*kv),
                              int(row["heads"]), int(row["kv_heads"]), int(row["head_dim"]),
                              ctypes.byref(mix))
    return mix


def is_mixed(row: Mapping[str, object]) -> bool:
    """Whether a row's step has decodes and longer queries both (what attention_mix takes)."""
    mix = to_mix(row)
    return mix.decodes > 0 and mix.prefills > 0


def attention_mix_feature_matrix(rows: Iterable[Mapping[str, object]],
                                 spec_vector: Iterable[float],
                                 kernel_ids: Iterable[int]) -> np.ndarray:
    """Mixed-step attention feature vectors (rv_attention_mix_features) of rows with their
    per-sequence lengths."""
    return _by_kernel(native().rv_attention_mix_features, map(to_mix, rows), spec_vector,
                      kernel_ids)


def moe_feature_matrix(rows: Iterable[Mapping[str, object]],
                       spec_vector: Iterable[float]) -> np.ndarray:
    """Fused-MoE feature vectors (rv_moe_features) of launch rows with their MOE_COLUMNS."""
    lib = native()
    spec = _spec_array(spec_vector)
    out = (ctypes.c_double * NFEAT_MAX)()
    result = []
    for row in rows:
        n = lib.rv_moe_features(ctypes.byref(to_launch(row)), int(row["moe_experts"]),
                                int(row["moe_top_k"]), spec, out)
        result.append(list(out[:n]))
    return np.asarray(result, dtype=np.float64)


def moe_roofline_ns(row: Mapping[str, object], spec_vector: Iterable[float]) -> int:
    """Roofline duration (ns) of a fused-MoE launch under uniform routing."""
    return int(native().rv_moe_roofline_ns(ctypes.byref(to_launch(row)), int(row["moe_experts"]),
                                           int(row["moe_top_k"]), _spec_array(spec_vector)))
