"""`revati compare` end to end on two flag sets of the pinned vLLM (issue #29, item 2): a
module of its own, so that no idle emulated server competes with its deployments."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def test_compare_prints_each_metric_per_variant_with_the_difference(tmp_path: Path) -> None:
    """Sixteen requests at once against a server that runs four at a time wait for each
    other, against the default limit that runs them all: TTFT differs by far more than the
    runs of one variant spread, and the table says so."""
    r = subprocess.run(
        [sys.executable, "-m", "revati.cli.main", "compare", "--variant", "default=",
         "--variant", "seqs4=--max-num-seqs 4", "--repeat", "2", "--model", "llama3_8b",
         "--hardware", "h200", "--input-len", "128", "--output-len", "32",
         "--num-prompts", "16", "--request-rate", "inf", "--out", str(tmp_path), "--",
         "--max-model-len", "4096"], capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "| mean TTFT ms |" in r.stdout and "seqs4 vs default" in r.stdout
    result = json.loads((tmp_path / "compare.json").read_text())
    assert result["variants"] == ["default", "seqs4"] and result["runs"] == 2
    ttft = result["metrics"]["mean_ttft_ms"]
    assert ttft["vs_default"]["seqs4"]["delta_pct"] > 50
    assert not ttft["vs_default"]["seqs4"]["within_spread"]
    for name in ("default", "seqs4"):
        for i in range(2):
            s = json.loads((tmp_path / name / f"run{i}" / "summary.json").read_text())
            assert s["completed"] == 16 and s["total_output_tokens"] == 16 * 32
    # each variant's server ran with its own flags (vLLM logs the ones it was given)
    assert "'max_num_seqs': 4" in (tmp_path / "seqs4" / "engine.log").read_text()
    assert "'max_num_seqs'" not in (tmp_path / "default" / "engine.log").read_text()


def test_compare_refuses_a_single_variant_before_starting_anything(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "revati.cli.main", "compare", "--variant", "default=",
         "--model", "llama3_8b", "--hardware", "h200", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert r.stderr.strip() == ("revati compare: revati compare needs two or more variants "
                                "with distinct names")
    assert not (tmp_path / "default").exists()
