"""timerfd timers expire at their virtual deadline, read directly or through epoll/poll."""

from __future__ import annotations

import pytest

from tests.host import HOST_DELAY
from tests.timewarp.conftest import run_py

TIMERFD = """
import ctypes, json, os, select, struct, time
libc = ctypes.CDLL(None, use_errno=True)
class timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]
class itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", timespec), ("it_value", timespec)]
def arm(fd, seconds, interval=0.0, absolute=False):
    v = itimerspec(timespec(int(interval), int(interval % 1 * 1e9)),
                   timespec(int(seconds), int(seconds % 1 * 1e9)))
    assert libc.timerfd_settime(fd, 1 if absolute else 0, ctypes.byref(v), None) == 0
def timerfd():
    return libc.timerfd_create(time.CLOCK_MONOTONIC, 0)
"""


@pytest.mark.parametrize("wait", ["read", "epoll", "poll"])
def test_timerfd_expires_at_the_virtual_deadline(wait: str) -> None:
    r = run_py(TIMERFD + f"""
fd = timerfd()
a = time.monotonic()
arm(fd, 250.5)
if "{wait}" == "epoll":
    ep = select.epoll(); ep.register(fd, select.EPOLLIN); ep.poll()
elif "{wait}" == "poll":
    p = select.poll(); p.register(fd, select.POLLIN); p.poll()
(count,) = struct.unpack("Q", os.read(fd, 8))
print(json.dumps({{"elapsed": time.monotonic() - a, "count": count}}))
""")
    assert r.returncode == 0, r.stderr
    out = r.json()
    assert out["elapsed"] == pytest.approx(250.5, abs=HOST_DELAY + r.stolen_s)
    assert out["count"] == 1


def test_absolute_timerfd_and_gettime_follow_the_virtual_clock() -> None:
    r = run_py(TIMERFD + """
time.sleep(1000)  # virtual and real clocks now differ by 1000 s
fd = timerfd()
target = int(time.monotonic()) + 30
arm(fd, target, absolute=True)
cur = itimerspec()
libc.timerfd_gettime(fd, ctypes.byref(cur))
left = cur.it_value.tv_sec + cur.it_value.tv_nsec / 1e9
os.read(fd, 8)
print(json.dumps({"now": time.monotonic(), "target": target, "left": left}))
""")
    assert r.returncode == 0, r.stderr
    out = r.json()
    assert out["now"] == pytest.approx(out["target"], abs=HOST_DELAY + r.stolen_s)
    assert 29 < out["left"] <= 30


def test_periodic_timerfd_in_an_epoll_loop() -> None:
    r = run_py(TIMERFD + """
fd = timerfd()
ep = select.epoll(); ep.register(fd, select.EPOLLIN)
a = time.monotonic()
arm(fd, 2, interval=2)
ticks = []
while len(ticks) < 5:
    ep.poll()
    os.read(fd, 8)
    ticks.append(time.monotonic() - a)
print(json.dumps({"ticks": ticks}))
""")
    assert r.returncode == 0, r.stderr
    assert r.json()["ticks"] == pytest.approx([2, 4, 6, 8, 10], abs=HOST_DELAY + r.stolen_s)
