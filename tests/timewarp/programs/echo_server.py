"""Answers each request after sleeping DELAY seconds (TCP line protocol or ZeroMQ REP)."""

import socket
import sys
import time

import zmq

transport, port, delay, count = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
if transport == "tcp":
    listener = socket.create_server(("127.0.0.1", port))
    print("ready", flush=True)
    conn, _ = listener.accept()
    f = conn.makefile("rwb", buffering=0)
    for _ in range(count):
        line = f.readline()
        time.sleep(delay)
        f.write(line)
else:
    s = zmq.Context().socket(zmq.REP)
    s.bind(f"tcp://127.0.0.1:{port}")
    print("ready", flush=True)
    for _ in range(count):
        m = s.recv()
        time.sleep(delay)
        s.send(m)
