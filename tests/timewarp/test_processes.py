"""Done-when 6, 7, 8, 9: determinism across processes, deadlock, lifecycle, trace."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.host import HOST_DELAY
from tests.timewarp.conftest import processes_of, revati_run, run_py

PROGRAMS = Path(__file__).with_name("programs")


def test_eight_processes_give_the_same_virtual_event_order_every_time() -> None:
    orders = []
    for _ in range(5):
        r = revati_run([sys.executable, str(PROGRAMS / "mesh.py"), "8", "6", "1234"])
        assert r.returncode == 0, r.stderr
        events = r.json()["events"]
        assert len(events) == 8 * 6
        orders.append([(e[1], e[2]) for e in sorted(events)])
    assert all(o == orders[0] for o in orders)


def test_deadlock_is_reported_with_both_waiters_and_fails_the_run() -> None:
    r = revati_run([sys.executable, str(PROGRAMS / "deadlock.py")],
                   run_opts=["--deadlock-timeout", "1"], timeout=60)
    assert r.returncode == 125
    assert "deadlock" in r.stderr
    waiting = [line for line in r.stderr.splitlines() if "deadlock.py" in line]
    assert len(waiting) >= 2, r.stderr  # parent and child, each blocked in its read
    assert all("read" in line for line in waiting)
    assert r.wall_s < 30
    assert not processes_of(str(PROGRAMS / "deadlock.py"))


def test_crashing_child_ends_the_run_with_its_status_and_leaves_nothing() -> None:
    marker = "crash-marker-5521"
    r = run_py(f"""
        import os, subprocess, sys, time
        # a grandchild that would outlive its parent
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(10**6)", "{marker}"])
        time.sleep(1)
        os.abort()
    """)
    assert r.returncode == 128 + signal.SIGABRT
    assert not processes_of(marker)


@pytest.mark.parametrize("how", ["abort", "term"])
def test_shared_memory_of_an_ended_run_is_removed_unless_still_held(how: str,
                                                                    tmp_path: Path) -> None:
    """Engines stopped by a signal leave their /dev/shm segments behind; the run removes
    those its processes held, whether the command crashed or ended its workers on SIGTERM,
    but not one that a process outside the run still holds."""
    if not Path("/dev/shm").is_dir():
        pytest.skip("no /dev/shm")
    orphan = Path(f"/dev/shm/revati-test-orphan-{how}-{os.getpid()}")
    kept = Path(f"/dev/shm/revati-test-kept-{how}-{os.getpid()}")
    kept.write_bytes(b"x" * 4096)
    ready = tmp_path / "ready"
    args = [sys.executable, str(PROGRAMS / "shm_holder.py"), how, str(ready), str(orphan),
            str(kept)]
    with kept.open("rb"):  # held by this test process, outside the run
        if how == "abort":
            assert revati_run(args).returncode == 128 + signal.SIGABRT
        else:
            run = subprocess.Popen([sys.executable, "-m", "revati.cli.main", "run", "--", *args])
            deadline = time.monotonic() + 60
            while not ready.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            run.terminate()
            assert run.wait(timeout=60) == 0
        assert not orphan.exists()
        assert not Path(f"/dev/shm/sem.{orphan.name}-sem").exists()
        assert kept.exists()
    kept.unlink()


def test_a_child_dead_but_not_waited_for_leaves_the_table() -> None:
    """A zombie holds no slot: killed while it spun (counted as running), it is gone from the
    deadlock report, which lists every thread the Timekeeper still counts."""
    r = run_py("""
        import os, signal, time
        pid = os.fork()
        if pid == 0:
            while True:
                pass
        time.sleep(0.5)
        os.kill(pid, signal.SIGKILL)  # never waited for: a zombie until the run ends
        print(pid, flush=True)
        os.read(os.pipe()[0], 1)  # waits forever: a deadlock, reported
    """, run_opts=["--deadlock-timeout", "1"], timeout=60)
    assert r.returncode == 125, r.stderr
    child = int(r.stdout.split()[0])
    listed = [line for line in r.stderr.splitlines() if line.strip().startswith("pid ")]
    assert listed, r.stderr  # the parent, waiting in its read
    assert not [line for line in listed if line.split()[1] == str(child)], r.stderr


def test_child_killed_by_a_signal() -> None:
    r = run_py("import os, signal, time; time.sleep(5); os.kill(os.getpid(), signal.SIGKILL)")
    assert r.returncode == 128 + signal.SIGKILL


def test_exit_code_is_the_commands() -> None:
    assert revati_run(["bash", "-c", "exit 7"]).returncode == 7
    missing = revati_run(["no-such-command-xyz"])
    assert missing.returncode == 127
    assert "no-such-command-xyz" in missing.stderr


def test_ctrl_c_ends_the_run_cleanly() -> None:
    marker = "ctrlc-marker-8812"
    # Waits with no deadline: once every emulated thread sleeps, the clock jumps to the
    # earliest deadline, so a sleep of 10**6 s could end (exit 0) before the SIGINT arrives,
    # as it did once with both cores busy (.ci/stress).
    code = (f"import signal, subprocess, sys; subprocess.Popen([sys.executable, '-c', "
            f"'import signal; signal.pause()', '{marker}']); print('up', flush=True); "
            f"signal.pause()")
    p = subprocess.Popen([sys.executable, "-m", "revati.cli.main", "run", "--", sys.executable,
                          "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "up"
    p.send_signal(signal.SIGINT)
    rc = p.wait(timeout=30)
    assert rc != 0
    time.sleep(0.2)
    assert not processes_of(marker)


def test_trace_has_one_event_per_jump(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    r = run_py("""
        import json, time
        for d in (1, 2, 3): time.sleep(d)
        print(json.dumps({}))
    """, run_opts=["--trace", str(trace)])
    assert r.returncode == 0, r.stderr
    doc = json.loads(trace.read_text())
    jumps = [e for e in doc["traceEvents"] if e.get("name") == "jump"]
    assert len(jumps) == 3
    assert [round(e["dur"] / 1e6, 2) for e in jumps] == pytest.approx([1, 2, 3],
                                                                      abs=HOST_DELAY + r.stolen_s)
    for e in jumps:
        assert e["ph"] == "X" and isinstance(e["ts"], float)


def test_multiprocessing_fork_and_spawn_children_share_the_clock() -> None:
    r = revati_run([sys.executable, str(PROGRAMS / "mp_children.py")])
    assert r.returncode == 0, r.stderr
    for method, res in r.json().items():
        # the child's wake-up after the jump is host work (10.9 ms seen at load 5.5)
        assert res["inner"] == pytest.approx([50] * 3, abs=HOST_DELAY + r.stolen_s), method
        assert 50 <= res["outer"] < 53 + r.stolen_s, method  # spawn's start-up is real CPU time
