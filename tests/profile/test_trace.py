"""`revati profile trace`: running the traced program, and reading every GPU record."""

from __future__ import annotations

from revati.profile.kineto import gpu_records
from revati.profile.trace import run_program

from .test_kineto import TRACE


def test_runs_code_scripts_and_modules_with_their_arguments(tmp_path, capsys):
    assert run_program(["-c", "import sys; print(sys.argv[1:])", "x", "y"]) == 0
    script = tmp_path / "prog.py"
    script.write_text("import sys\nprint(sys.argv[1])\nraise SystemExit(3)\n")
    assert run_program([str(script), "hello"]) == 3
    assert run_program(["-m", "json.tool", "--help"]) == 0
    out = capsys.readouterr().out
    assert "['x', 'y']" in out and "hello" in out and "json.tool" in out


def test_gpu_records_in_gpu_order_with_streams():
    records = gpu_records(TRACE)
    assert [r.name for r, _ in records] == ["nvjet_a", "splitKreduce", "nvjet_a",
                                            "Memcpy HtoD (Pinned -> Device)",
                                            "Memcpy DtoD (Device -> Device)"]
    assert {stream for _, stream in records} == {-1}  # the synthetic trace names no stream
