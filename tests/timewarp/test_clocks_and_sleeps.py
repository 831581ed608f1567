"""Done-when 1 and 2 of the time-warp issue: clocks and sleeps, asyncio, uvloop."""

from __future__ import annotations

import textwrap

import pytest

from tests.host import HOST_DELAY
from tests.timewarp.conftest import revati_run, run_py

HOUR = 3600.0


@pytest.mark.parametrize("clock", ["time.monotonic", "time.time", "time.perf_counter"])
def test_sleep_an_hour_reads_an_hour_on_every_clock(clock: str) -> None:
    r = run_py(f"""
        import json, time
        a = {clock}()
        time.sleep(3600)
        print(json.dumps({{"elapsed": {clock}() - a}}))
    """)
    assert r.returncode == 0, r.stderr
    assert r.json()["elapsed"] == pytest.approx(HOUR, abs=HOST_DELAY + r.stolen_s)
    assert r.wall_s < HOUR / 100  # the hour was warped, not waited


def test_datetime_now_follows_virtual_time() -> None:
    r = run_py("""
        import json, time, datetime
        a = datetime.datetime.now()
        time.sleep(3600)
        print(json.dumps({"elapsed": (datetime.datetime.now() - a).total_seconds()}))
    """)
    assert r.returncode == 0, r.stderr
    assert r.json()["elapsed"] == pytest.approx(HOUR, abs=HOST_DELAY + r.stolen_s)


def test_shell_sleep_command() -> None:
    # bash's own clock (EPOCHREALTIME) reads gettimeofday: no fork of `date` in the interval.
    # The interval still holds the fork and exec of `sleep` with its preloaded shims, real
    # work that takes real (so virtual) time: 5-15 ms on the 2-core CI machine, so the bound
    # above the hour is loose; what matters is that the hour passed and was not waited.
    r = revati_run(["bash", "-c", "a=$EPOCHREALTIME; sleep 3600; b=$EPOCHREALTIME; "
                    "echo \"$b - $a\" | bc"])
    assert r.returncode == 0, r.stderr
    assert HOUR <= float(r.stdout) < HOUR + 0.25 + r.stolen_s
    assert r.wall_s < HOUR / 100


def test_absolute_deadline_on_the_virtual_clock() -> None:
    """clock_nanosleep(TIMER_ABSTIME) with a deadline computed from the virtual clock."""
    r = run_py("""
        import ctypes, json, time
        libc = ctypes.CDLL(None)
        class timespec(ctypes.Structure):
            _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]
        time.sleep(100)  # move the virtual clock well away from the real one
        start = time.clock_gettime(time.CLOCK_REALTIME)
        target = timespec(int(start) + 60, 0)
        rc = libc.clock_nanosleep(time.CLOCK_REALTIME, 1, ctypes.byref(target), None)
        print(json.dumps({"rc": rc, "now": time.clock_gettime(time.CLOCK_REALTIME),
                          "target": int(start) + 60}))
    """)
    assert r.returncode == 0, r.stderr
    out = r.json()
    assert out["rc"] == 0
    assert out["now"] == pytest.approx(out["target"], abs=HOST_DELAY + r.stolen_s)


def on_event_loop(loop: str, body: str) -> str:
    """A program that runs `async def main()` with this body on asyncio's own loop or on
    uvloop, and prints what main() returns as {"elapsed": ...}."""
    return f"""
import asyncio, json, time
async def main():
{textwrap.indent(textwrap.dedent(body), "    ")}
if "{loop}" == "uvloop":
    import uvloop
    elapsed = uvloop.run(main())
else:
    elapsed = asyncio.run(main())
print(json.dumps({{"elapsed": elapsed}}))
"""


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_asyncio_sleeps_add_up_in_virtual_time(loop: str) -> None:
    r = run_py(on_event_loop(loop, """
        a = time.monotonic()
        for _ in range(1000):
            await asyncio.sleep(0.01)
        return time.monotonic() - a
    """))
    assert r.returncode == 0, r.stderr
    # No sleep ends before its 10 ms, so a skipped one reads under 10 s. On top of the sleeps
    # the clock counts the real time the loop ran (`revati run` counts CPU work at real speed):
    # at most the command's wall time. A fixed allowance does not hold: 0.1-0.2 ms an
    # iteration on a quiet host, 0.33 ms pinned to a core beside a busy loop (10.331 s).
    assert 10.0 - 1e-6 <= r.json()["elapsed"] <= 10.0 + r.wall_s


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_asyncio_wait_for_times_out_at_the_virtual_deadline(loop: str) -> None:
    r = run_py(on_event_loop(loop, """
        a = time.monotonic()
        try:
            await asyncio.wait_for(asyncio.sleep(600), timeout=42)
        except asyncio.TimeoutError:
            return time.monotonic() - a
    """))
    assert r.returncode == 0, r.stderr
    assert r.json()["elapsed"] == pytest.approx(42.0, abs=HOST_DELAY + r.stolen_s)
