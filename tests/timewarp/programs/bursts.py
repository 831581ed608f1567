"""Spins for CPU_S seconds of its own CPU time while a child process competes for the same
core in bursts (BURST_S of CPU, then a GAP_S sleep), and prints the virtual seconds that took.
Usage: bursts.py CPU_S BURST_S GAP_S"""

import os
import sys
import time


def spin(s: float) -> None:
    t = time.thread_time()
    while time.thread_time() - t < s:
        pass


cpu_s, burst_s, gap_s = (float(a) for a in sys.argv[1:4])
child = os.fork()
if child == 0:
    while True:
        spin(burst_s)
        time.sleep(gap_s)
v0 = time.monotonic()
spin(cpu_s)
print(f"{time.monotonic() - v0:.4f}")
os.kill(child, 9)
os.waitpid(child, 0)
