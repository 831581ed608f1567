from pathlib import Path

from revati.bench.load import MEASURED_RUN
from revati.bench.window import MeasuredStart


def test_a_load_that_ends_between_two_looks_keeps_its_measured_kernels(tmp_path: Path) -> None:
    engine_log, client_log = tmp_path / "engine.log", tmp_path / "client.log"
    engine_log.write_text("start-up\n")
    client_log.write_text("Warming up with 2 requests...\n")
    counts = {"model_ns": 100}
    start = MeasuredStart(lambda: dict(counts), engine_log, client_log)
    counts["model_ns"] = 150  # the warm-ups
    assert not start.look()
    # between this look and the next the client starts and ends its measured requests
    with client_log.open("a") as f:
        f.write(f"{MEASURED_RUN}...\n")
    counts["model_ns"] = 400
    with engine_log.open("a") as f:
        f.write("JIT compilation during inference\n")
    assert start.look()
    # the counts and log length of the look before the line, not the end's
    assert start.totals == {"model_ns": 150}
    assert start.engine_log_size == len("start-up\n")
    counts["model_ns"] = 500
    assert start.look() and start.totals == {"model_ns": 150}  # kept once found
