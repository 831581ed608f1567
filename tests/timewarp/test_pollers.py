"""Busy pollers (sched_yield, sleep(0)) neither freeze the clock nor let it run ahead."""

from __future__ import annotations

import pytest

from tests.host import HOST_DELAY
from tests.timewarp.conftest import run_py


@pytest.mark.parametrize("spin", ["os.sched_yield()", "time.sleep(0)"])
def test_spinning_poller_sees_the_flag_when_it_is_set(spin: str) -> None:
    r = run_py(f"""
        import json, os, sys, threading, time
        flag = []
        def setter():
            time.sleep(3)
            flag.append(time.monotonic())
        threading.Thread(target=setter).start()
        a = time.monotonic()
        spins = 0
        while not flag:
            {spin}
            spins += 1
        seen = time.monotonic()
        print(json.dumps({{"set": flag[0] - a, "seen": seen - a, "gil": sys.getswitchinterval()}}))
    """, timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.json()
    # the clock moved on (no freeze); the setter may wait a GIL switch interval to wake (and
    # may have begun its sleep a moment before `a` was read)
    assert 3 - 0.005 <= out["set"] < 3 + out["gil"] + HOST_DELAY + r.stolen_s
    # and not past the setter's work: the poller holds the GIL, so the setter can need one
    # GIL switch interval to get it back, as it would without emulation; beyond that only the
    # host's delays, not a jump of the clock
    assert 0 <= out["seen"] - out["set"] < out["gil"] + HOST_DELAY + r.stolen_s


def test_poller_across_processes_through_shared_memory() -> None:
    """The vLLM shared-memory broadcast pattern: a reader spins on a flag in shared memory
    that a writer in another process sets after a sleep."""
    r = run_py("""
        import json, mmap, os, struct, time
        buf = mmap.mmap(-1, 16)
        if os.fork() == 0:
            time.sleep(2)
            buf[8:16] = struct.pack("d", time.monotonic())
            buf[0:1] = b"\\x01"
            time.sleep(5)
            os._exit(0)
        while buf[0:1] != b"\\x01":
            os.sched_yield()
        seen = time.monotonic()
        (written,) = struct.unpack("d", buf[8:16])
        os.wait()
        print(json.dumps({"lag": seen - written}))
    """, timeout=60)
    assert r.returncode == 0, r.stderr
    # the reader's wake-up after the write is host time (under 1 ms on an idle host); a clock
    # that ran on to the writer's next sleep would read 5 s
    assert 0 <= r.json()["lag"] < HOST_DELAY + r.stolen_s
