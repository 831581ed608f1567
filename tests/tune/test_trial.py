"""run_trial: the benchmark command line, and failures recorded with their reason."""

import sys

import pytest
from omegaconf import OmegaConf

from revati.cli.main import SUBCOMMANDS
from revati.tune.trial import TrialError, bench_command, run_trial


def test_bench_command_carries_the_configuration(make_cfg, tmp_path):
    cfg = make_cfg("+model=llama70b", "parallelism.tensor_parallel_size=4",
                   "workload.request_rate=2.5", "seed=7")
    cmd = bench_command(cfg, tmp_path)
    assert cmd[:4] == [sys.executable, "-m", "revati.cli.main", "bench"]
    sep = cmd.index("--")
    flags = dict(zip(cmd[4:sep:2], cmd[5:sep:2], strict=True))
    assert flags == {"--engine": "vllm", "--model": "llama3_70b", "--hardware": "h200_sxm",
                     "--tp": "4", "--pp": "1", "--dataset": "random", "--input-len": "1024",
                     "--output-len": "128", "--num-prompts": "500", "--request-rate": "2.5",
                     "--seed": "7", "--out": str(tmp_path)}
    assert "--max-num-seqs" in cmd[sep:]


@pytest.mark.skipif("bench" in SUBCOMMANDS, reason="revati bench exists: its runs are e2e tests")
def test_missing_bench_fails_with_the_reason(make_cfg, tmp_path):
    cfg = make_cfg("+model=llama8b")
    OmegaConf.update(cfg, "trial.out_dir", str(tmp_path), force_add=True)
    with pytest.raises(TrialError, match=r"bench exited with status 2: .*invalid choice: 'bench'"):
        run_trial(cfg)
    assert "invalid choice" in (tmp_path / "bench.log").read_text()
    assert "revati.cli.main bench" in (tmp_path / "command.txt").read_text()
    assert not (tmp_path / "summary.json").exists()
