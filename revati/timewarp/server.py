"""A standalone Timekeeper (`revati timekeeper --address ADDR`) that several `revati run
--timekeeper ADDR` commands share, so that all their processes live in one virtual time.

Control traffic goes over ZeroMQ (REQ/REP, JSON); the clock itself is the shared segment,
so the processes never talk to this server on the hot path. All commands must run on the
same machine as the server (they map its segment)."""

from __future__ import annotations

import logging
import signal
import threading
import time
from pathlib import Path

import zmq

from revati.timewarp.timekeeper import ThreadReport, Timekeeper
from revati.timewarp.trace import merge_trace

log = logging.getLogger("revati.timekeeper")
# how long a detected deadlock stays reported, so every client polling it can see it
DEADLOCK_REPORT_S = 2.0


def serve(address: str, trace: Path | None, deadlock_timeout_s: float,
          ready: threading.Event | None = None, cores: int = 0) -> int:
    trace_dir = trace.with_suffix(".parts") if trace else None
    if trace_dir:
        trace_dir.mkdir(parents=True, exist_ok=True)
    tk = Timekeeper(trace_dir=trace_dir, deadlock_timeout_s=deadlock_timeout_s, restart=True,
                    cores=cores)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.REP)
    try:
        sock.bind(address)
    except zmq.ZMQError as e:
        tk.stop()
        log.error("cannot listen on %s: %s", address, e)
        return 1
    stop = threading.Event()
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, lambda *_: stop.set())
    tk.start()
    log.warning("timekeeper listening on %s (segment %s)", address, tk.segment)
    if ready:
        ready.set()
    try:
        while not stop.is_set():
            if not sock.poll(200):
                continue
            req = sock.recv_json()
            op = req.get("op")
            if op == "attach":
                sock.send_json({"segment": str(tk.segment)})
            elif op == "reserve":
                sock.send_json({"slot": tk.reserve(int(req["owner"]))})
            elif op == "started":
                tk.child_started(int(req["slot"]), int(req["pid"]))
                sock.send_json({})
            elif op == "deadlocked":
                sock.send_json({"deadlocked": tk.deadlock_seen_within(DEADLOCK_REPORT_S)})
            elif op == "status":
                sock.send_json({"virtual_ns": tk.virtual_ns, "jumps": tk.jumps,
                                "deadlocked": tk.deadlock_seen_within(DEADLOCK_REPORT_S),
                                "threads": [vars(t) for t in tk.threads()],
                                "pids": tk.pids()})
            elif op == "stop":
                sock.send_json({})
                stop.set()
            else:
                sock.send_json({"error": f"unknown op {op!r}"})
    finally:
        tk.stop()
        sock.close(linger=0)
        ctx.term()
        if trace and trace_dir:
            merge_trace(trace_dir, trace)
    return 0


class RemoteTimekeeper:
    """The client side: what `revati run --timekeeper ADDRESS` needs of the server."""

    def __init__(self, address: str, timeout_s: float = 5.0) -> None:
        self.address = address
        self.ctx = zmq.Context()
        self.timeout_ms = int(timeout_s * 1000)
        self.segment = Path(self._call({"op": "attach"})["segment"])
        self._last_status = 0.0
        self._deadlocked = False

    def _call(self, req: dict) -> dict:
        # a fresh socket per call: a REQ socket is unusable after a timed-out request
        sock = self.ctx.socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        try:
            sock.connect(self.address)
            sock.send_json(req)
            if not sock.poll(self.timeout_ms):
                raise ConnectionError(f"no Timekeeper answers at {self.address}")
            return sock.recv_json()
        finally:
            sock.close()

    def start(self) -> None:
        pass

    def stop(self) -> None:
        self.ctx.term()

    def reserve(self, owner_pid: int) -> int:
        return int(self._call({"op": "reserve", "owner": owner_pid})["slot"])

    def child_started(self, idx: int, pid: int) -> None:
        self._call({"op": "started", "slot": idx, "pid": pid})

    def _status(self) -> dict:
        return self._call({"op": "status"})

    def pids(self) -> list[int]:
        return self._status()["pids"]

    def threads(self) -> list[ThreadReport]:
        return [ThreadReport(**t) for t in self._status()["threads"]]

    @property
    def deadlocked(self) -> bool:
        # polled from the runner's wait loop: ask the server at most a few times a second
        now = time.monotonic()
        if now - self._last_status > 0.25:
            self._last_status = now
            self._deadlocked = self._call({"op": "deadlocked"})["deadlocked"]
        return self._deadlocked
