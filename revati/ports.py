"""Loopback ports for the servers Revati starts, chosen where no other program takes them.

A port that the kernel hands out for bind(("127.0.0.1", 0)) lies in the ephemeral range
(/proc/sys/net/ipv4/ip_local_port_range), which every outgoing connection and every bind to
port 0 of the engines' own processes draws from. A server port picked there and bound a
minute later, after the engine's start-up, can be taken in between: in CI on 2026-12-03 an
SGLang API server found its port taken after 83 s of start-up by a connection of its own
deployment. Below that range a port is only ever taken by a program that asks for it by
number, so a free one stays free unless another Revati run picks the same one; the random
pick makes that unlikely and the bind check catches a port already held."""

from __future__ import annotations

import random
import socket
from pathlib import Path

_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10_000        # above the well-known and most registered services' ports


def _ephemeral_start() -> int:
    try:
        return int(_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768   # Linux's default


def is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback port that is free now and outside the ephemeral range."""
    top = _ephemeral_start()
    if top <= _LOWEST + 100:        # a host whose ephemeral range starts low: take what bind gives
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(_LOWEST, top)
        if is_free(port):
            return port
    raise OSError(f"no free loopback port found in {_LOWEST}-{top - 1}")
