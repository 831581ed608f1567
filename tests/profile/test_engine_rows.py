"""`revati profile engine-rows`: an engine's real kernels joined to its emulated launches."""

from __future__ import annotations

import gzip
import json

from revati.cli.main import main
from revati.profile.engine_rows import rows

NORM = "triton_red_fused_fused_add_rms_norm_2"
ATTN = "void flash::FlashAttnFwdSm90<128>(int)"  # attention: predicted by shape, not by launch


def kernel(name: str, grid: int, dur_us: float) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "ts": 0, "dur": dur_us,
            "args": {"grid": [grid, 1, 1], "block": [512, 1, 1]}}


def write_inputs(tmp_path):
    trace = tmp_path / "trace.json.gz"
    with gzip.open(trace, "wt") as f:
        json.dump({"traceEvents": [
            kernel(NORM, 8192, 50.0), kernel(NORM, 8192, 52.0), kernel(NORM, 8192, 80.0),
            kernel(NORM, 16, 3.0),      # a launch shape the emulated run never made
            kernel(ATTN, 132, 900.0),
            {"cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 0, "dur": 1.0}]}, f)
    log = tmp_path / "launches.tsv"
    log.write_text("\n".join([
        f"0\t{NORM}\t8192\t1\t1\t512\t1\t1\t64\t0\t0\t8192\t12288",
        f"0\t{NORM}\t8192\t1\t1\t512\t1\t1\t64\t0\t0\t8192\t12288",
        f"0\t{ATTN}\t132\t1\t1\t512\t1\t1\t0\t0\t0\t4096\t9000",
        "2\t\t0\t0\t0\t0\t0\t0\t0\t4096\t1\t0\t0"]) + "\n")
    return trace, log


def test_a_real_kernel_gets_its_median_duration_and_the_emulated_launchs_sizes(tmp_path):
    trace, log = write_inputs(tmp_path)
    got, summary = rows(trace, log, "engine_test")
    assert len(got) == 1  # the attention kernel is left to its shape model
    r = got[0]
    assert (r["kernel"], r["grid_x"], r["block_x"]) == (NORM, 8192, 512)
    assert r["duration_ns"] == 52_000 and r["reps"] == 3
    assert (r["shared_bytes"], r["arg_max"], r["arg_sum"]) == (64, 8192, 12288)
    assert summary["gpu_time_unmatched_ms"] == 0.003  # the 16-row launch: no sizes known
    assert summary["unmatched_top"][0][0] == NORM


def test_the_command_writes_rows_the_profile_takes(tmp_path, capsys):
    trace, log = write_inputs(tmp_path)
    out = tmp_path / "rows.jsonl"
    assert main(["profile", "engine-rows", "--trace", str(trace), "--launch-log", str(log),
                 "--trace", str(trace), "--launch-log", str(log), "--sweep", "engine_test",
                 "--out", str(out)]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 1 and lines[0]["reps"] == 6 and lines[0]["duration_ns"] == 52_000
    assert main(["profile", "engine-rows", "--trace", str(trace), "--sweep", "s",
                 "--launch-log", str(log), "--launch-log", str(log), "--out", str(out)]) == 2
