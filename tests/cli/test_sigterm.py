"""SIGTERM ends a revati command through its cleanup, also when a second one follows."""

import subprocess
import sys
from pathlib import Path

PROGRAM = """
import os, signal, sys, time
from revati.cli.main import exit_on_sigterm
exit_on_sigterm()
try:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
finally:
    os.kill(os.getpid(), signal.SIGTERM)  # a second SIGTERM, as `timeout` + pkill send
    time.sleep(0.2)
    open(sys.argv[1], "w").write("cleaned up")
"""


def test_a_second_sigterm_does_not_cut_the_cleanup_short(tmp_path: Path) -> None:
    done = tmp_path / "done"
    proc = subprocess.run([sys.executable, "-c", PROGRAM, str(done)], timeout=30)
    assert proc.returncode == 143
    assert done.read_text() == "cleaned up"
