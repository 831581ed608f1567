"""Two revati-tune workers given one PostgreSQL storage URL share one Optuna study.

The test starts its own throw-away PostgreSQL cluster (as an unprivileged user, in a temp
folder, on a free local port); it is skipped when the server binaries are not installed.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient
from optuna.trial import TrialState

from revati.ports import free_port


def _pg_bindir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(candidates[-1]).parent if candidates else None



@pytest.fixture(scope="module")
def postgres_url():
    bindir = _pg_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries not installed (apt-get install postgresql)")
    # SQLAlchemy's default PostgreSQL driver (postgresql:// URLs) is psycopg 3.
    pytest.importorskip("psycopg", reason="psycopg (the tune extra) not installed")
    root = Path(tempfile.mkdtemp(prefix="revati-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser: cannot start PostgreSQL")
        nobody = pwd.getpwnam("nobody")
        os.chown(root, nobody.pw_uid, nobody.pw_gid)
        as_user = ["runuser", "-u", "nobody", "--"]
    data, port = root / "data", free_port()

    def pg(*args: str) -> None:
        subprocess.run([*as_user, *args], check=True, capture_output=True, timeout=120)

    pg(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
    pg(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-w",
       "-o", f"-h 127.0.0.1 -p {port} -k {root}", "start")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        pg(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


def test_two_workers_share_one_study(postgres_url, tmp_path):
    # A one-GPU budget leaves one point of the tp_pp grid feasible: one launched trial
    # (whose engine refuses a flag: it fails in seconds, a result the storage records like
    # any other), eleven pruned ones; the two workers split the grid between them.
    budget = 12
    args = ["+model=llama8b", "sweep=tp_pp", "parallelism.max_gpus=1",
            "workload.num_prompts=10", "engine.extra_args=[--no-such-vllm-flag]",
            f"study.storage={postgres_url}", "study.show_progress=false"]
    workers = [subprocess.Popen(
        [sys.executable, "-m", "revati.tune.app", *args,
         f"mlflow.tracking_uri=sqlite:///{tmp_path}/mlflow-{i}.db"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(2)]
    for proc in workers:
        _, err = proc.communicate(timeout=2400)
        assert proc.returncode == 0, err

    [summary] = optuna.get_all_study_summaries(postgres_url)
    study = optuna.load_study(study_name=summary.study_name, storage=postgres_url)
    numbers = {t.number for t in study.trials}
    # Every grid point ran, so the one feasible layout was launched: the workers shuffle the grid
    # alike (two seeds made two orders, and grid ids that meant different points in each,
    # so duplicates stood in for points nobody ran), and a duplicate drawn by both at once
    # does not use up the budget.
    points = {tuple(sorted(t.params.items())) for t in study.trials}
    assert len(points) == budget and len(numbers) >= budget
    states = [t.state for t in study.trials]
    assert states.count(TrialState.FAIL) >= 1
    assert all(s in (TrialState.FAIL, TrialState.PRUNED) for s in states)

    per_worker = []
    for i in range(2):
        client = MlflowClient(f"sqlite:///{tmp_path}/mlflow-{i}.db")
        exp = client.get_experiment_by_name("revati-tune")
        runs = client.search_runs([exp.experiment_id], max_results=100)
        per_worker.append({int(r.data.tags["revati.trial"]) for r in runs
                           if "revati.trial" in r.data.tags})
    assert all(per_worker), f"a worker ran no trial: {per_worker}"
    assert per_worker[0].isdisjoint(per_worker[1])
    assert per_worker[0] | per_worker[1] == numbers
