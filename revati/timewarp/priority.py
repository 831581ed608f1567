"""The emulated deployment's scheduling priority: ahead of this host's other programs, where
the system lets it (docs/timewarp.md, "Priority").

A thread of the deployment that waits for a core behind another program, a short burst of
work at a time, waits in virtual time too: the clock's rate sees such waits only over bursts
longer than its samples. Ahead of the other programs, a woken thread preempts them and a
running one keeps most of its core, so there is little of that wait left to count."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

# The nice value the deployment runs at: a nice-0 program then gets about a tenth of a core
# that it shares with a thread of the deployment (the kernel's weights: 1024 against 9548).
NICE = -10


@contextmanager
def ahead() -> Iterator[int]:
    """Run the block with the calling thread at nice NICE when it runs at the default 0 and
    the system permits (root, CAP_SYS_NICE or an RLIMIT_NICE that allows it); a nice value
    someone chose is kept. The threads and processes the block starts inherit it; the calling
    thread returns to its own afterwards, so nothing else it starts later (a test's busy
    processes) runs ahead too. Yields the nice value in effect."""
    now = os.getpriority(os.PRIO_PROCESS, 0)
    raised = False
    if now == 0:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, NICE)
            raised = True
        except PermissionError:
            pass
    try:
        yield NICE if raised else now
    finally:
        if raised:
            os.setpriority(os.PRIO_PROCESS, 0, now)
