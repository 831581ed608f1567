"""The probe behind the host's factor in the clock rate (docs/timewarp.md, "One rate for CPU
work"): while a run goes on, it times one repetition of revati.hostspeed's Python workload
every PERIOD_S, in its thread's CPU time (waiting for a core is contention, which the
Timekeeper measures per thread), and sets the Timekeeper's speed to the GPU node's time for
that workload over the fastest of the last KEEP readings here. So a host whose cores slow
down or speed up during a run (frequency, a neighbour on the same physical core) counts its
CPU work at the node's speed throughout, not at a snapshot's.

The fastest, not the median: the node's figure is the workload timed with nothing else
running, and beside a running engine a repetition here often pays for what ran on its core
before it: up to twice its CPU time on a quiet 2-core host, less when the host is loaded. The
median followed those dips, so the same load counted its CPU work as slower on a quiet host
than on a busy one (docs/timewarp.md, "One rate for CPU work")."""

from __future__ import annotations

import ctypes
import threading
import time
from collections import deque

from revati.hostspeed import repetition

PERIOD_S = 1.0  # one ~25 ms repetition a second: ~2.5 % of one core
# readings kept: a slowdown that lasts longer than KEEP periods (frequency, steal, a neighbour
# on the same physical core) shows in all of them, and so in the fastest
KEEP = 7


class HostProbe:
    """Times the workload on a thread of its own and pushes the speed to the Timekeeper."""

    def __init__(self, lib: ctypes.CDLL, node_ms: float) -> None:
        self.lib = lib
        self.node_ms = node_ms
        self.readings: deque[float] = deque(maxlen=KEEP)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="host-probe", daemon=True)

    def start(self) -> None:
        for _ in range(3):  # a speed before any emulated process starts
            self.measure()
        self._thread.start()

    def measure(self) -> float:
        """One reading: set and return the speed (node ms over this host's fastest ms)."""
        self.readings.append(repetition(clock=time.thread_time) * 1000)
        speed = self.node_ms / min(self.readings)
        self.lib.rv_tk_set_speed(int(speed * 1e6))
        return speed

    def _loop(self) -> None:
        while not self._stop.wait(PERIOD_S):
            self.measure()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
