"""What `revati bench` shows when the engine fails to start: the first traceback's end
(where a worker failed), not only the API server's last lines."""

from pathlib import Path

from revati.workload.bench import _tail


def test_start_up_failure_shows_the_workers_root_cause(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    worker = ["(Worker_TP1 pid=12) Traceback (most recent call last):",
              '(Worker_TP1 pid=12)   File "x.py", line 3, in f',
              "(Worker_TP1 pid=12)     g()",
              "(Worker_TP1 pid=12) RuntimeError: NCCL error: unhandled system error"]
    server = [f"(APIServer pid=9) line {i}" for i in range(30)]
    server += ["(APIServer pid=9) Traceback (most recent call last):",
               "(APIServer pid=9)   File \"u.py\", line 1272, in wait",
               "(APIServer pid=9) RuntimeError: Engine core initialization failed."]
    log.write_text("\n".join(["INFO start", *worker, *server]) + "\n")
    shown = _tail(log).splitlines()
    assert shown[0] == "first error:"
    assert "(Worker_TP1 pid=12) RuntimeError: NCCL error: unhandled system error" in shown
    assert shown[-1].endswith("Engine core initialization failed.")


def test_a_log_without_traceback_shows_its_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("\n".join(f"line {i}" for i in range(40)) + "\n")
    assert _tail(log).splitlines() == [f"line {i}" for i in range(25, 40)]
    assert _tail(tmp_path / "missing.log") == "(no log)"
