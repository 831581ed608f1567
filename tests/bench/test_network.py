"""A deployment's private network (revati.bench.network): only its own loopback, and
the thread that entered it back on the host's network after."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from revati.bench import network

ROOT = os.geteuid() == 0


def interfaces() -> list[str]:
    """This thread's network interfaces (/proc/net/dev follows the thread's namespace)."""
    lines = Path("/proc/thread-self/net/dev").read_text().splitlines()[2:]
    return sorted(line.split(":")[0].strip() for line in lines)


@pytest.mark.skipif(not ROOT, reason="a network namespace needs CAP_SYS_ADMIN")
def test_inside_only_loopback_is_up_and_leaving_returns_to_the_host() -> None:
    host_ns, host_ifaces = os.readlink("/proc/thread-self/ns/net"), interfaces()
    net = network.PrivateNetwork()
    net.enter()
    try:
        assert net.private and net.where == network.PRIVATE_NETWORK
        assert os.readlink("/proc/thread-self/ns/net") != host_ns
        assert interfaces() == ["lo"]
        with socket.create_server(("127.0.0.1", 0)) as srv:  # loopback is up: it answers
            with socket.create_connection(srv.getsockname(), timeout=5):
                pass
    finally:
        net.leave()
    assert not net.private
    assert os.readlink("/proc/thread-self/ns/net") == host_ns and interfaces() == host_ifaces


@pytest.mark.skipif(not ROOT, reason="needs root to take the capability away")
def test_without_the_capability_a_deployment_says_it_is_on_the_host_network() -> None:
    # still root (the checkout need not be readable by anyone else), without CAP_SYS_ADMIN
    r = subprocess.run(["setpriv", "--bounding-set=-sys_admin", sys.executable, "-c",
                        "from revati.bench import network; print(network.available())"],
                       capture_output=True, text=True, timeout=60,
                       cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(network.HOST_NETWORK) and "not permitted" in r.stdout


BINDER = """
import json, socket
v4 = socket.socket(socket.AF_INET)
v4.bind(("0.0.0.0", 0))
v6 = socket.socket(socket.AF_INET6)
v6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)  # dual stack, as torch's store
v6.bind(("::", 0))
print(json.dumps([v4.getsockname()[0], v6.getsockname()[0]]))
"""
DEPLOYMENT = """
import sys
from pathlib import Path
from revati.bench.deployment import Deployment
from revati.timewarp.runner import emulated_env
log = Path(sys.argv[1])
dep = Deployment(cores=1)
try:
    pid = dep.spawn([sys.executable, "-c", sys.argv[2]], emulated_env(dep.tk.segment, "warn", {}),
                    log)
    dep.wait(pid, None, "binder", 60, log)
finally:
    dep.close()
print(dep.network.where)
"""


@pytest.mark.skipif(not ROOT, reason="needs root to take the capability away")
def test_without_a_namespace_a_deployment_binds_wildcards_to_loopback(tmp_path: Path) -> None:
    """Issue #27: where no namespace can be made, what the deployment's processes bind to
    every interface (vLLM's torch.distributed store) is bound to loopback instead."""
    log = tmp_path / "binder.log"
    r = subprocess.run(["setpriv", "--bounding-set=-sys_admin", sys.executable, "-c",
                        DEPLOYMENT, str(log), BINDER], capture_output=True, text=True,
                       timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(network.HOST_NETWORK)
    assert log.read_text().split() == ['["127.0.0.1",', '"::ffff:127.0.0.1"]']
