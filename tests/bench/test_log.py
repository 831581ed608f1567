"""What `revati bench` shows when the engine fails to start: the first traceback's end
(where a worker failed), not only the API server's last lines."""

from pathlib import Path

from revati.bench.deployment import tail
from revati.bench.results import jit_compilations
from revati.engines import sglang, vllm


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
    shown = tail(log).splitlines()
    assert shown[0] == "first error:"
    assert "(Worker_TP1 pid=12) RuntimeError: NCCL error: unhandled system error" in shown
    assert shown[-1].endswith("Engine core initialization failed.")


def test_a_log_without_traceback_shows_its_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("\n".join(f"line {i}" for i in range(40)) + "\n")
    assert tail(log).splitlines() == [f"line {i}" for i in range(25, 40)]
    assert tail(tmp_path / "missing.log") == "(no log)"


def test_compilations_while_serving_are_counted_from_the_measured_requests_on(tmp_path: Path):
    """vLLM's jit_monitor line (as the real H200 server logged it,
    validation/vllm/llama3_8b-knobs/2026-12-04-real/) names the kernel; one logged before the
    measured requests started is not theirs."""
    warn = ("(EngineCore pid=840) WARNING 12-04 04:23:40 [jit_monitor.py:135] Triton kernel JIT "
            "compilation during inference: {}. This causes a latency spike; consider extending "
            "warmup to cover this shape/config.\n")
    log = tmp_path / "engine.log"
    log.write_text(warn.format("_topk_topp_kernel"))
    offset = log.stat().st_size
    with log.open("a") as f:
        f.write("(EngineCore pid=840) INFO 12-04 04:23:41 [loggers.py:1] throughput\n")
        f.write(warn.format("fused_moe_kernel"))
    assert jit_compilations(vllm.JIT_DURING_SERVING, log, offset) == ["fused_moe_kernel"]
    assert jit_compilations(vllm.JIT_DURING_SERVING, log, 0) == ["_topk_topp_kernel",
                                                                  "fused_moe_kernel"]
    assert jit_compilations(sglang.JIT_DURING_SERVING, log, 0) is None
