"""summary.json from the client's raw result: failed requests are counted with their reasons,
and `revati bench` then exits non-zero."""

import argparse
from pathlib import Path

from revati.bench.results import summarise
from revati.cli import bench as cli

TRACEBACK = "Traceback (most recent call last):\n  ...\naiohttp.ClientResponseError: 500"


def raw(errors: list[str]) -> dict:
    ok = sum(1 for e in errors if not e)
    return {"completed": ok, "failed": len(errors) - ok, "errors": errors,
            "ttfts": [0.01] * len(errors), "duration": 1.0, "mean_ttft_ms": 10.0}


def test_failure_reasons_keep_each_errors_last_line_most_frequent_first() -> None:
    s = summarise(raw(["", TRACEBACK, "timeout", TRACEBACK]), 1.0, 100)
    assert s["failed"] == 3 and "errors" not in s
    assert s["failure_reasons"] == {"aiohttp.ClientResponseError: 500": 2, "timeout": 1}
    assert summarise(raw(["", ""]), 1.0, 100)["failure_reasons"] == {}


def test_a_run_with_failed_requests_exits_non_zero(monkeypatch, capsys, tmp_path: Path):
    summary = summarise(raw([TRACEBACK] * 4), 1.0, 100)
    monkeypatch.setattr(cli, "run_bench", lambda opts: summary)
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    args = parser.parse_args(["bench", "--model", "llama3_8b", "--hardware", "h200",
                              "--out", str(tmp_path)])
    assert cli.main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("revati bench: 4 of 4 requests failed (4 x aiohttp.") and "\n" == err[-1]
