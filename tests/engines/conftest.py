"""Helpers shared by the engines' end-to-end tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from revati.bench.server import EmulatedServer

BENCH = [sys.executable, "-m", "revati.cli.main", "bench"]


def post(srv: EmulatedServer, path: str, body: dict) -> dict:
    """POST a JSON body to the emulated server's API and return its JSON answer."""
    req = urllib.request.Request(f"http://127.0.0.1:{srv.port}{path}",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())


def run_bench_command(out: Path, args: list[str], engine_args: list[str],
                      env: dict[str, str] | None = None
                      ) -> tuple[subprocess.CompletedProcess, dict]:
    """The whole `revati bench ARGS --out OUT -- ENGINE_ARGS` on a deployment of its own, which
    must succeed; returns the finished command and its summary.json. `env` adds to the
    environment (the engine inherits it)."""
    r = subprocess.run([*BENCH, *args, "--out", str(out), "--", *engine_args],
                       capture_output=True, text=True, timeout=1800,
                       env=os.environ | (env or {}))
    assert r.returncode == 0, r.stderr[-3000:]
    return r, json.loads((out / "summary.json").read_text())
