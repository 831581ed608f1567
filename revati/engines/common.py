"""What Revati asks of every engine's process and server, whatever the engine."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def has_module(python: Path, module: str) -> bool:
    """Whether `python` can import `module` (without importing it: engines load slowly)."""
    r = subprocess.run([str(python), "-c", "import importlib.util as u, sys; "
                        f"sys.exit(u.find_spec({module!r}) is None)"], capture_output=True)
    return r.returncode == 0


def http_ok(port: int, path: str, timeout: float = 2) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _request(req: urllib.request.Request | str, timeout: float) -> bytes | None:
    """The body of a request to the local server, None when it does not answer 2xx."""
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.read()
    except (urllib.error.URLError, OSError):
        return None


def http_post(port: int, path: str, timeout: float = 30) -> bytes | None:
    """The body of an empty POST to the local server, None when it does not answer 2xx."""
    return _request(urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=b"",
                                           method="POST"), timeout)


def complete_together(port: int, model: str, n: int, timeout: float = 600) -> bool:
    """n completions of a few tokens sent at once, so that the engine runs them as one batch;
    whether every one was served."""
    # token ids, not text: any tokenizer takes them (the catalog's synthetic one has no
    # unknown-word token)
    body = json.dumps({"model": model, "prompt": list(range(100, 116)), "max_tokens": 4,
                       "min_tokens": 4, "ignore_eos": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with ThreadPoolExecutor(n) as pool:
        return all(b is not None for b in pool.map(lambda _: _request(req, timeout), range(n)))


def http_get(port: int, path: str, timeout: float = 5) -> bytes | None:
    """The body of a GET on the local server, None when it does not answer."""
    return _request(f"http://127.0.0.1:{port}{path}", timeout)


def http_json(port: int, path: str, timeout: float = 5) -> dict:
    """A GET's JSON body, {} when the server does not answer or answers something else."""
    body = http_get(port, path, timeout)
    try:
        doc = json.loads(body) if body is not None else {}
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def max_model_len(port: int) -> int | None:
    """The longest request (prompt plus output) the served model takes, from the OpenAI
    API's model card (/v1/models), which vLLM and SGLang both fill in."""
    cards = http_json(port, "/v1/models").get("data") or []
    return cards[0].get("max_model_len") if cards else None


# How long the server keeps an idle connection open, in seconds, above the 60 s for which
# the load generator (`vllm bench serve`, aiohttp's keepalive_timeout) reuses one. Both
# engines' default is uvicorn's 5 s: the server then closes connections the client still
# pools, and a request sent on one as it closes fails ("Cannot write to closing
# transport"; 1 of 500 in the 70B tp_pp sweep's TP 4 x PP 2 trial, which failed it). The
# client closing first is what benchmark harnesses set for the same race
# (llm-d-benchmark's VLLM_HTTP_TIMEOUT_KEEP_ALIVE=120); an idle connection costs nothing.
SERVER_KEEP_ALIVE_S = "120"

# Revati's read-only batch observers, one plugin per engine (revati_vllm_observer,
# revati_sglang_observer): on the engine's PYTHONPATH, each engine's own plugin loader finds
# its plugin (by the entry point in its dist-info) and loads it in every engine process,
# so attention kernels are predicted from each forward's sequence lengths.
OBSERVERS_DIR = Path(__file__).resolve().with_name("observers")


def with_observers(env: dict[str, str]) -> dict[str, str]:
    """env with the observers' folder first on PYTHONPATH."""
    paths = (str(OBSERVERS_DIR), env.get("PYTHONPATH"))
    return env | {"PYTHONPATH": os.pathsep.join(p for p in paths if p)}
