"""Helpers shared by the engines' end-to-end tests."""

from __future__ import annotations

import json
import urllib.request

from revati.workload.bench import EmulatedServer


def post(srv: EmulatedServer, path: str, body: dict) -> dict:
    """POST a JSON body to the emulated server's API and return its JSON answer."""
    req = urllib.request.Request(f"http://127.0.0.1:{srv.port}{path}",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())
