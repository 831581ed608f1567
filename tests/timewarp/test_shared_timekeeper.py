"""A standalone `revati timekeeper` gives several `revati run` commands one clock."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from revati.ports import free_port
from tests.host import HOST_DELAY, stolen_s

PROGRAMS = Path(__file__).with_name("programs")
REVATI = [sys.executable, "-m", "revati.cli.main"]


@pytest.fixture
def timekeeper(tmp_path: Path):
    address = f"ipc://{tmp_path}/tk.ipc"
    tk = subprocess.Popen([*REVATI, "timekeeper", "--address", address], stderr=subprocess.PIPE,
                          text=True)
    assert "listening" in tk.stderr.readline()
    yield address
    tk.terminate()
    assert tk.wait(timeout=10) == 0


def test_server_and_client_in_two_runs_share_one_clock(timekeeper: str) -> None:
    port = free_port()
    stolen0 = stolen_s()
    server = subprocess.Popen(
        [*REVATI, "run", "--timekeeper", timekeeper, "--", sys.executable,
         str(PROGRAMS / "echo_server.py"), "tcp", str(port), "0.05", "20"],
        stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline().strip() == "ready"
    client = subprocess.run(
        [*REVATI, "run", "--timekeeper", timekeeper, "--", sys.executable,
         str(PROGRAMS / "echo_client.py"), "tcp", "0.05", "20", str(port)],
        capture_output=True, text=True, timeout=60)
    assert client.returncode == 0, client.stderr
    assert server.wait(timeout=30) == 0
    rtts = json.loads(client.stdout.splitlines()[-1])["rtts"]
    # with two separate clocks the server's sleeps would be warped away in its own clock
    # and the client would measure almost nothing
    assert min(rtts) >= 0.05
    # and the shared clock adds nothing to the server's 50 ms but the host's processing
    assert max(rtts) < 0.05 + HOST_DELAY + stolen_s() - stolen0, rtts


def test_unreachable_timekeeper_is_a_clear_error(tmp_path: Path) -> None:
    t0 = time.monotonic()
    r = subprocess.run([*REVATI, "run", "--timekeeper", f"ipc://{tmp_path}/none.ipc", "--",
                        "true"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "no Timekeeper answers" in r.stderr
    assert time.monotonic() - t0 < 30
