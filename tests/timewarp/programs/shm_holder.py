"""Holds shared-memory files through a child, as an engine's workers do, then ends.

    shm_holder.py abort|term READY_FILE SHM_FILE...

The child creates and maps each SHM_FILE, and a POSIX named semaphore named after the first
(/dev/shm/sem.NAME-sem, as Python multiprocessing's locks are, without the resource tracker
that would unlink it on a clean exit). abort: the program then aborts, leaving the child
to the run. term: it touches READY_FILE and waits; on SIGTERM it kills the child (a server
ending its workers) and exits 0."""

import _multiprocessing
import mmap
import os
import signal
import subprocess
import sys

if sys.argv[1] == "child":
    for path in sys.argv[2:]:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        os.ftruncate(fd, 4096)
        mmap.mmap(fd, 4096)
    # kind 1: a semaphore; unlink False: the name stays until someone unlinks it
    sem = _multiprocessing.SemLock(1, 1, 1, f"/{os.path.basename(sys.argv[2])}-sem", False)
    print("mapped", flush=True)
    signal.pause()  # a sleep would end: the clock jumps while everything sleeps

how, ready, files = sys.argv[1], sys.argv[2], sys.argv[3:]
child = subprocess.Popen([sys.executable, __file__, "child", *files], stdout=subprocess.PIPE)
child.stdout.readline()
if how == "abort":
    os.abort()
signal.signal(signal.SIGTERM, lambda *_: (child.kill(), sys.exit(0)))
open(ready, "w").close()
signal.pause()
