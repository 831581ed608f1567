"""Two processes pass a byte back and forth ROUNDS times, one spinning 1 ms of its own CPU
time before each send, the other 2 ms, and the first prints the virtual milliseconds a round
took: 3 ms of CPU plus two hand-offs, whatever the host. On one core the sender is often
preempted by the thread it woke, on its way out of the send. Usage: pingpong.py ROUNDS"""

import os
import socket
import sys
import time


def spin(s: float) -> None:
    t = time.thread_time()
    while time.thread_time() - t < s:
        pass


rounds = int(sys.argv[1])
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
    a.recv(1)
print((time.monotonic() - t0) / rounds * 1000)
os.wait()
