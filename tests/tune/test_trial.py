"""run_trial: the benchmark command line (failures and their reasons: test_app.py; shared
engines: test_shared_engine.py)."""

import sys

from revati.tune.trial import bench_command


def test_bench_command_carries_the_configuration(make_cfg, tmp_path):
    cfg = make_cfg("+model=llama70b", "parallelism.tensor_parallel_size=4",
                   "workload.request_rate=2.5", "seed=7")
    cmd = bench_command(cfg, tmp_path)
    assert cmd[:4] == [sys.executable, "-m", "revati.cli.main", "bench"]
    sep = cmd.index("--")
    flags = dict(zip(cmd[4:sep:2], cmd[5:sep:2], strict=True))
    assert flags == {"--engine": "vllm", "--model": "llama3_70b", "--hardware": "h200_sxm",
                     "--tp": "4", "--pp": "1", "--dataset": "random", "--input-len": "1024",
                     "--output-len": "128", "--range-ratio": "0.0", "--num-prompts": "500",
                     "--request-rate": "2.5", "--burstiness": "1.0", "--num-warmups": "16",
                     "--seed": "7", "--ready-timeout": "3600.0",
                     "--out": str(tmp_path)}
    assert "--max-num-seqs" in cmd[sep:]


def _flags(cmd: list[str]) -> dict[str, str]:
    sep = cmd.index("--")
    return dict(zip(cmd[4:sep:2], cmd[5:sep:2], strict=True))


def test_each_dataset_passes_its_own_arguments(make_cfg, tmp_path):
    flags = _flags(bench_command(make_cfg("workload=sharegpt"), tmp_path))
    assert flags["--dataset"] == "sharegpt" and "--input-len" not in flags
    flags = _flags(bench_command(make_cfg("workload=azure_conv"), tmp_path))
    assert flags["--dataset"] == "trace" and flags["--trace"] == "azure_conv_2023"
    flags = _flags(bench_command(make_cfg("workload.burstiness=inf"), tmp_path))
    assert flags["--burstiness"] == "inf"
