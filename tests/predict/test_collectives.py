"""Collectives and vLLM's custom all-reduce by the hardware spec's collective table
(roofline.c: collective_ns, custom_allreduce_ns), through the C predictor in a fresh process
(it reads its environment once)."""

from __future__ import annotations

import csv
import ctypes
import json
from pathlib import Path

import pytest

from revati.device.spec import load_spec, write_flat
from revati.predict import registry
from revati.predict.features import Coll, Op, empty_launch_row, native
from revati.predict.roofline import RooflineSpec

from .conftest import PREDICT_PRELUDE, REPO, predictor_json

CSV = REPO / "revati/predict/data/collectives/h100_h200_nvswitch_published.csv"
KIB, MIB = 1 << 10, 1 << 20
# Bytes per rank over NVLink, as roofline.c and tools/calibrate/collectives_published.py count
# them: nccl-tests' bus-bandwidth factors; the custom all-reduce's one-stage kernel reads the
# buffer from every peer, the two-stage one moves what a ring all-reduce does.
WIRE = {"allreduce": lambda n: 2 * (n - 1) / n, "allgather": lambda n: (n - 1) / n,
        "reducescatter": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0,
        "sendrecv": lambda n: 1.0, "custom_allreduce_1stage": lambda n: n - 1.0,
        "custom_allreduce_2stage": lambda n: 2 * (n - 1) / n}
COLL = {"allreduce": Coll.ALLREDUCE, "allgather": Coll.ALLGATHER,
        "reducescatter": Coll.REDUCESCATTER, "broadcast": Coll.BROADCAST}
# vllm::cross_device_reduce_{1,2}stage<__nv_bfloat16, ngpus>, as the shim sees it (mangled)
CUSTOM_AR = ("_ZN4vllm26cross_device_reduce_{stage}stageI13__nv_bfloat16Li{n}EEEvPNS_8RankData"
             "ENS_11RankSignalsEPNS_6SignalEPT_ii")

PRELUDE = PREDICT_PRELUDE + "print(json.dumps([predict(r) for r in json.loads(ROWS)]))\n"


def predict(rows: list[dict[str, object]], env: dict[str, str]) -> list[list[int]]:
    """[ns, source] of each launch row by rv_predict_ns, in one fresh process."""
    return predictor_json(PRELUDE.replace("ROWS", repr(json.dumps(rows))), env)


def coll(op: str, nranks: int, nbytes: int) -> dict[str, object]:
    row = empty_launch_row(Op.COLLECTIVE)
    row.update(coll=int(COLL[op]), nranks=nranks, bytes=nbytes)
    return row


def custom_ar(stage: int, n: int, nbytes: int) -> dict[str, object]:
    row = empty_launch_row(Op.KERNEL)
    row.update(kernel=CUSTOM_AR.format(stage=stage, n=n), grid_x=36, block_x=512,
               arg_max=nbytes // 16, arg_sum=nbytes // 16 + 1)
    return row


def table_ns(op: str, n: int, nbytes: int) -> float:
    """The spec's model: alpha + wire bytes / bus bandwidth, in ns."""
    alpha_us, busbw = load_spec("h200_sxm").collectives[op][n]
    return alpha_us * 1e3 + WIRE[op](n) * nbytes / busbw


@pytest.fixture
def h200(tmp_path: Path) -> dict[str, str]:
    return {"REVATI_HW_SPEC": str(write_flat(load_spec("h200_sxm"), tmp_path / "h200.txt"))}


def test_the_spec_carries_the_fitted_table_to_the_predictor(tmp_path):
    spec = load_spec("h200_sxm")
    table = spec.collectives
    assert set(table["allreduce"]) == {2, 4, 8} and set(table["sendrecv"]) == {2}
    flat = write_flat(spec, tmp_path / "h200.txt").read_text().splitlines()
    alpha, busbw = table["allgather"][4]
    assert f"collective.allgather.4 {alpha!r} {busbw!r}" in flat


def test_small_allreduce_costs_its_latency_not_the_nvlink_line_rate(h200):
    (ns, src), = predict([coll("allreduce", 8, KIB)], h200)
    alpha_ns = load_spec("h200_sxm").collectives["allreduce"][8][0] * 1e3
    assert src == 1 and ns == pytest.approx(alpha_ns, rel=0.01)  # latency-bound
    old = RooflineSpec.from_flat_file(h200["REVATI_HW_SPEC"]).roofline_ns(coll("allreduce", 8,
                                                                               KIB))
    assert ns > 10 * old  # the bare roofline: 4 ns on the wire plus a launch


def test_large_allreduce_is_bandwidth_bound_within_the_fits_error(h200):
    (ns, _), = predict([coll("allreduce", 8, 256 * MIB)], h200)
    assert ns == pytest.approx(table_ns("allreduce", 8, 256 * MIB), abs=1)
    alpha_ns = load_spec("h200_sxm").collectives["allreduce"][8][0] * 1e3
    assert alpha_ns < 0.05 * ns
    with CSV.open() as f:
        rows = [r for r in csv.DictReader(f) if (r["op"], r["nranks"]) == ("allreduce", "8")]
    fit_error = max(abs(table_ns("allreduce", 8, int(r["bytes"])) / (1e3 * float(r["time_us"]))
                        - 1) for r in rows)
    published = [1e3 * float(r["time_us"]) for r in rows
                 if int(r["bytes"]) == 256 * MIB and r["derived"] == "0"]
    assert len(published) >= 2 and fit_error < 0.25
    assert all(abs(ns / t - 1) <= fit_error + 1e-6 for t in published)  # ns: rounded


def test_more_ranks_cost_more_latency(h200):
    ops = ("allreduce", "allgather", "reducescatter", "broadcast")
    out = predict([coll(op, n, KIB) for op in ops for n in (2, 4, 8)], h200)
    for i, op in enumerate(ops):
        two, four, eight = (ns for ns, _ in out[3 * i:3 * i + 3])
        assert two < four < eight, op


def test_send_recv_is_one_pair_whatever_the_communicators_size(h200):
    rows = []
    for c in (Coll.SEND, Coll.RECV):
        row = empty_launch_row(Op.COLLECTIVE)
        row.update(coll=int(c), nranks=8, bytes=64 * MIB)
        rows.append(row)
    out = predict(rows, h200)
    assert [ns for ns, _ in out] == [pytest.approx(table_ns("sendrecv", 2, 64 * MIB), abs=1)] * 2


def test_the_table_is_the_specs(tmp_path, h200):
    """Another alpha in the spec file moves the prediction by as much; a spec without the table
    (every spec before it) keeps the NVLink roofline, as do collectives the table lacks."""
    lines = Path(h200["REVATI_HW_SPEC"]).read_text().splitlines()
    alpha, busbw = load_spec("h200_sxm").collectives["allreduce"][8]
    edited = tmp_path / "edited.txt"
    edited.write_text("\n".join(f"collective.allreduce.8 {alpha + 100} {busbw}"
                                if ln.startswith("collective.allreduce.8 ") else ln
                                for ln in lines) + "\n")
    bare = tmp_path / "bare.txt"
    bare.write_text("\n".join(ln for ln in lines if not ln.startswith("collective.")) + "\n")
    alltoall = dict(coll("allreduce", 8, MIB), coll=int(Coll.ALLTOALL))
    rows = [coll("allreduce", 8, MIB), coll("allreduce", 16, MIB), alltoall]
    base = predict(rows, h200)
    more = predict(rows, {"REVATI_HW_SPEC": str(edited)})
    none = predict(rows, {"REVATI_HW_SPEC": str(bare)})
    assert more[0][0] - base[0][0] == pytest.approx(100_000, abs=1)
    roofline = RooflineSpec.from_flat_file(bare)
    assert [ns for ns, _ in none] == [roofline.roofline_ns(r) for r in rows]
    assert base[1:] == none[1:]  # 16 ranks, all-to-all: not in the table


def test_the_custom_all_reduce_kernel_tells_its_size_in_its_arguments():
    """vllm::cross_device_reduce_*(RankData*, RankSignals, Signal*, T*, int rank, int size):
    the scalars give `size`, the buffer in 16-byte packs; the 64-byte RankSignals structure and
    the pointers are left out."""
    lib = native()
    lib.rv_arg_layout.argtypes = [ctypes.c_char_p]
    lib.rv_arg_sizes.argtypes = [ctypes.c_int, ctypes.c_uint32 * 3, ctypes.c_uint32 * 3,
                                 ctypes.c_int, ctypes.POINTER(ctypes.c_uint16),
                                 ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64)]
    layout = lib.rv_arg_layout(CUSTOM_AR.format(stage=1, n=8).encode())
    ptr = [ctypes.c_uint64(0x7F00_0000_0000 + i) for i in range(3)]
    signals = (ctypes.c_uint64 * 8)(*range(0x7E00_0000_0000, 0x7E00_0000_0008))
    rank, packs = ctypes.c_int32(5), ctypes.c_int32(MIB // 16)
    values = [ptr[0], signals, ptr[1], ptr[2], rank, packs]
    arg_max, arg_sum = ctypes.c_int64(), ctypes.c_int64()
    lib.rv_arg_sizes(layout, (ctypes.c_uint32 * 3)(36, 1, 1), (ctypes.c_uint32 * 3)(512, 1, 1),
                     6, (ctypes.c_uint16 * 6)(8, 64, 8, 8, 4, 4),
                     (ctypes.c_void_p * 6)(*(ctypes.cast(ctypes.byref(v), ctypes.c_void_p)
                                             for v in values)),
                     ctypes.byref(arg_max), ctypes.byref(arg_sum))
    assert arg_max.value == MIB // 16 and arg_sum.value == MIB // 16 + 5


def test_custom_all_reduce_by_the_table(h200):
    rows = [custom_ar(1, 8, 256 * KIB), custom_ar(2, 8, 4 * MIB), custom_ar(1, 4, 256 * KIB),
            dict(custom_ar(1, 8, 256 * KIB), arg_max=-1),  # arguments not read: no size
            custom_ar(2, 2, 256 * KIB)]                     # a rank count the table lacks
    out = predict(rows, h200)
    expected = [table_ns("custom_allreduce_1stage", 8, 256 * KIB),
                table_ns("custom_allreduce_2stage", 8, 4 * MIB),
                table_ns("custom_allreduce_1stage", 4, 256 * KIB)]
    assert [ns for ns, _ in out[:3]] == [pytest.approx(e, abs=1) for e in expected]
    assert all(src == 1 for _, src in out)
    # the launch-shape roofline of an unknown kernel, not the table
    assert out[3][0] != pytest.approx(expected[0], rel=0.5) and out[4][0] == out[3][0]


def test_custom_all_reduce_beside_the_shipped_models(tmp_path):
    """The H200 models' "reduce" family claims the kernel by name but never saw it: the table
    predicts it rather than that family's model, as an unseen kernel."""
    spec_file = write_flat(load_spec("h200_sxm"), tmp_path / "h200.txt")
    env = {k: str(v) for k, v in registry.predictor_env("h200", spec_file).items()}
    (ns, src), = predict([custom_ar(1, 8, 256 * KIB)], env)
    assert src == 1 and ns == pytest.approx(table_ns("custom_allreduce_1stage", 8, 256 * KIB),
                                            abs=1)
