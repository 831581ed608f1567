"""Busy pollers (sched_yield, sleep(0)) neither freeze the clock nor let it run ahead."""

from __future__ import annotations

import pytest

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
    assert out["set"] == pytest.approx(3, abs=0.01)  # the clock moved on (no freeze)
    # and not past the setter's work: the poller holds the GIL, so the setter can need one
    # GIL switch interval to get it back, as it would without emulation
    assert 0 <= out["seen"] - out["set"] < out["gil"] + 0.002


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
    assert 0 <= r.json()["lag"] < 0.005
