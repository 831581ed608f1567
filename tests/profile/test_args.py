"""`revati profile args`: joining an emulated replay's launch log to a real-GPU profile."""

from __future__ import annotations

import importlib.util
import shutil

import pandas as pd
import pytest

from revati.predict.features import UNKNOWN_ARGS, Op, empty_launch_row
from revati.profile.args import demangle, join, read_log

NORM = "_ZN2at6native21vectorized_layer_normIfEEvPKfi"


def test_demangle_gives_the_names_cupti_reports():
    assert demangle(NORM) == "void at::native::vectorized_layer_norm<float>(float const*, int)"
    assert demangle("nvjet_sm90_tst_64x8") == "nvjet_sm90_tst_64x8"


def test_rows_take_the_sizes_of_launches_that_agree_and_keep_unknown_otherwise(tmp_path):
    log = tmp_path / "launches.tsv"
    log.write_text("\n".join([
        f"0\t{NORM}\t64\t1\t1\t32\t1\t1\t24\t0\t0\t99\t99",   # before any marker: ignored
        "#rms_norm/0",
        f"0\t{NORM}\t64\t1\t1\t32\t1\t1\t24\t0\t0\t4096\t4160",
        "3\t\t0\t0\t0\t0\t0\t0\t0\t2048\t0\t0\t0",
        f"0\t{NORM}\t128\t1\t1\t32\t1\t1\t24\t0\t0\t8192\t8320",
        "#",
    ]) + "\n")
    regions = read_log(log)
    assert list(regions) == ["rms_norm/0"] and len(regions["rms_norm/0"]) == 3
    name = demangle(NORM)
    rows = []
    for pos, grid in ((0, 64), (2, 256)):  # position 2: the profile saw another grid
        row = empty_launch_row(Op.KERNEL)
        row.update(kernel=name, grid_x=grid, block_x=32, shared_bytes=24, position=pos)
        rows.append(row)
    df = pd.DataFrame(rows)
    matched, tried = join(df, regions, lambda r: ("rms_norm/0", int(r["position"])))
    assert (matched, tried) == (1, 2)
    assert df.arg_max.tolist() == [4096, UNKNOWN_ARGS]
    assert df.arg_sum.tolist() == [4160, UNKNOWN_ARGS]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                    reason="torch (CUDA build) not installed (pip install -e .[device])")
def test_replay_on_an_emulated_gpu_gives_the_profile_its_argument_sizes(tmp_path):
    """The RMSNorm sweep replayed on an emulated H200: every row matches its launch, and the
    argument sizes hold the hidden size that the launch shape (one block per row) does not."""
    from revati.cli.main import main
    from revati.predict.hwprofile import read_profile
    from revati.profile.micro import MODELS, TOKENS
    from tests.predict.conftest import SMALL_PROFILE

    profile = tmp_path / "h200_small"
    shutil.copytree(SMALL_PROFILE, profile)
    assert main(["profile", "args", "--profile", str(profile), "--only", "rms_norm"]) == 0
    rows = read_profile(profile).launches
    norm = rows[rows.sweep == "rms_norm"].sort_values("point")
    hiddens = sorted({m[0] for m in MODELS.values()})
    assert norm.arg_max.tolist() == [h for h in hiddens for _ in TOKENS]
    assert (rows[rows.sweep != "rms_norm"].arg_max == UNKNOWN_ARGS).all()
