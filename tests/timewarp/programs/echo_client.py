"""Sends COUNT requests one after another to echo_server.py (started here, or already
listening on the PORT given) and prints the round trips."""

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import zmq

transport, delay, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
server = None
if len(sys.argv) > 4:  # a server someone else started
    port = int(sys.argv[4])
else:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("echo_server.py")), transport, str(port),
         delay, str(count)], stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline().strip() == "ready"
rtts = []
if transport == "tcp":
    f = socket.create_connection(("127.0.0.1", port)).makefile("rwb", buffering=0)
    for i in range(count):
        a = time.perf_counter()
        f.write(b"%d\n" % i)
        f.readline()
        rtts.append(time.perf_counter() - a)
else:
    s = zmq.Context().socket(zmq.REQ)
    s.connect(f"tcp://127.0.0.1:{port}")
    for i in range(count):
        a = time.perf_counter()
        s.send(b"%d" % i)
        s.recv()
        rtts.append(time.perf_counter() - a)
if server:
    server.wait()
print(json.dumps({"rtts": rtts}))
