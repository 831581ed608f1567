"""Two processes pass a byte back and forth ROUNDS times, one spinning 1 ms of its own CPU
time before each send, the other 2 ms, and the first prints the virtual milliseconds a round
took: 3 ms of CPU plus two hand-offs, whatever the host. On one core the sender is often
preempted by the thread it woke, on its way out of the send. With AFTER_MS, the first also
spins that long after each send, while the other works: on the node, with a core each, a
round is then 1 + max(2, AFTER_MS) ms of CPU. Usage: pingpong.py ROUNDS [AFTER_MS]"""

import os
import socket
import sys
import time


def spin(s: float) -> None:
    t = time.thread_time()
    while time.thread_time() - t < s:
        pass


rounds = int(sys.argv[1])
after = float(sys.argv[2]) / 1000 if len(sys.argv) > 2 else 0.0
a, b = socket.socketpair()
if os.fork() == 0:
    a.close()
    for _ in range(rounds):
        b.recv(1)
        spin(0.002)
        b.send(b"y")
    os._exit(0)
b.close()
t0 = time.monotonic()
for _ in range(rounds):
    spin(0.001)
    a.send(b"x")
    if after:
        spin(after)
    a.recv(1)
print((time.monotonic() - t0) / rounds * 1000)
os.wait()
