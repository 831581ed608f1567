"""The emulated deployment's scheduling priority: ahead of this host's other programs, where
the system lets it (docs/timewarp.md, "Priority").

A thread of the deployment that waits for a core behind another program, a short burst of
work at a time, waits in virtual time too: the clock's rate sees such waits only over bursts
longer than its samples. Ahead of the other programs, a woken thread preempts them and a
running one keeps most of its core, so there is little of that wait left to count."""

from __future__ import annotations

import os

# The nice value the deployment runs at: a nice-0 program then gets about a tenth of a core
# that it shares with a thread of the deployment (the kernel's weights: 1024 against 9548).
NICE = -10


def raise_priority() -> int:
    """Give the calling thread, and the threads and processes it starts from now on, nice
    NICE when it runs at the default 0 and the system permits (root, CAP_SYS_NICE or an
    RLIMIT_NICE that allows it); a nice value someone chose is kept. Returns the nice value
    it runs at."""
    now = os.getpriority(os.PRIO_PROCESS, 0)
    if now != 0:
        return now
    try:
        os.setpriority(os.PRIO_PROCESS, 0, NICE)
    except PermissionError:
        return now
    return NICE
