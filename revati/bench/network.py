"""A private network for one emulated deployment: only its own loopback, reachable from
nowhere else.

Engines listen beyond loopback (vLLM's torch.distributed store binds every interface), so on
a shared machine an emulation run would expose ports; and parallel tuner trials draw their
ports from one host-wide pool. A deployment therefore runs in a network namespace of its
own whose only interface is its loopback. Network namespaces belong to threads, and the
processes a thread starts inherit its namespace: the thread that starts a deployment enters
the namespace for the deployment's life, so the engine, the clients it starts and its own
readiness probes all meet on that loopback, and it returns to the host's network after.

Creating a namespace needs CAP_SYS_ADMIN (root, or a container that grants it). Without it
the deployment stays on the host's network and its processes get REVATI_LOOPBACK_ONLY=1
(`env()`): the time shim, preloaded into each of them, binds every socket bound to a
wildcard address to loopback instead (revati/native/time/loopback.c). `revati doctor` says
which of the two a run gets."""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct

CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
# struct ifreq as the two ioctls use it: the interface name, its flags, padding to 40 bytes
IFREQ = struct.Struct("16sH22x")
HOST_NETWORK = "the host's network, wildcard binds made loopback"
PRIVATE_NETWORK = "a private network namespace (loopback only)"

_libc = ctypes.CDLL(None, use_errno=True)


def _loopback_up() -> None:
    """A new namespace's loopback starts down: bring it up (what `ip link set lo up` does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        _, flags = IFREQ.unpack(fcntl.ioctl(s, SIOCGIFFLAGS, IFREQ.pack(b"lo", 0)))
        fcntl.ioctl(s, SIOCSIFFLAGS, IFREQ.pack(b"lo", flags | IFF_UP))


class PrivateNetwork:
    """Enter with `enter()` before a deployment's first process starts, `leave()` after its
    last ended; both from the same thread. `where` says which network the deployment got."""

    def __init__(self) -> None:
        self._host: int | None = None  # the host namespace to return to, while inside
        self.where = HOST_NETWORK

    @property
    def private(self) -> bool:
        return self._host is not None

    def env(self) -> dict[str, str]:
        """What the deployment's processes need in their environment: on the host's network,
        loopback-only binds."""
        return {} if self.private else {"REVATI_LOOPBACK_ONLY": "1"}

    def enter(self) -> None:
        host = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        if _libc.unshare(CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            os.close(host)
            self.where = f"{HOST_NETWORK}: no network namespace ({os.strerror(err)})"
            return
        self._host = host
        try:
            _loopback_up()
        except OSError:
            self.leave()
            raise
        self.where = PRIVATE_NETWORK

    def leave(self) -> None:
        if self._host is None:
            return
        if _libc.setns(self._host, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"returning to the host's network: {os.strerror(err)}")
        os.close(self._host)
        self._host = None


def available() -> str:
    """Which network a deployment would get here (one line for `revati doctor`)."""
    net = PrivateNetwork()
    net.enter()
    net.leave()
    return net.where
