"""The deployment runs ahead of this host's other programs where the system lets it
(revati/timewarp/priority.py; docs/timewarp.md, "Priority")."""

from __future__ import annotations

import os
import subprocess
import sys

from revati.timewarp.priority import NICE
from tests.timewarp.conftest import run_py

PRINT_NICE = "import os; print(os.getpriority(os.PRIO_PROCESS, 0))"


def _at(nice: int):
    """A preexec_fn that starts the child at this nice value (raising one is always allowed,
    and this process may run ahead already, after an earlier deployment in it)."""
    return lambda: os.setpriority(os.PRIO_PROCESS, 0, nice)


def _may_raise() -> bool:
    """Whether a process started here at nice 0 may lower its nice value."""
    r = subprocess.run([sys.executable, "-c", "import os; os.setpriority(os.PRIO_PROCESS, 0, -1)"],
                       capture_output=True, preexec_fn=_at(0))
    return r.returncode == 0


def test_the_emulated_processes_run_ahead_of_other_programs_where_permitted() -> None:
    r = run_py(PRINT_NICE, preexec_fn=_at(0))
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[-1]) == (NICE if _may_raise() else 0)


def test_a_nice_value_someone_chose_is_kept() -> None:
    r = run_py(PRINT_NICE, preexec_fn=_at(5))
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[-1]) == 5
