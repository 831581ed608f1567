"""The probe behind the host's factor in the clock rate (docs/timewarp.md, "One rate for CPU
work"): while a run goes on, it times one repetition of revati.hostspeed's Python workload
every PERIOD_S, in its thread's CPU time (waiting for a core is contention, which the
Timekeeper measures per thread), and sets the Timekeeper's speed to the GPU node's time for
that workload over the median of the last KEEP readings here. So a host whose cores slow
down or speed up during a run (frequency, a neighbour on the same physical core) counts its
CPU work at the node's speed throughout, not at a snapshot's."""

from __future__ import annotations

import ctypes
import statistics
import threading
import time
from collections import deque

from revati.hostspeed import repetition

PERIOD_S = 1.0  # one ~18 ms repetition a second: ~2 % of one core
# readings kept: one repetition reads up to ~10 % off the median here (a timer tick, a cache
# refilled after the engine ran), and the median of seven moves the rate by a few per cent
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
        """One reading: set and return the speed (node ms over this host's median ms)."""
        self.readings.append(repetition(clock=time.thread_time) * 1000)
        speed = self.node_ms / statistics.median(self.readings)
        self.lib.rv_tk_set_speed(int(speed * 1e6))
        return speed

    def _loop(self) -> None:
        while not self._stop.wait(PERIOD_S):
            self.measure()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
