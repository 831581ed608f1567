"""The engines' HTTP probes against a local server: JSON bodies, other bodies, silence."""

import http.server
import json
import socket
import threading

import pytest

from revati.engines import sglang, vllm
from revati.engines.common import http_json, max_model_len

BODIES = {
    "/v1/models": json.dumps({"data": [{"id": "m", "max_model_len": 4096}]}).encode(),
    "/server_info": json.dumps({"max_total_num_tokens": 1000, "page_size": 16}).encode(),
    "/metrics": b'vllm:cache_config_info{block_size="16",num_gpu_blocks="56851"} 1.0\n',
    "/list": b"[1, 2]",
    "/text": b"not json",
}


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        body = BODIES.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def port():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def test_engine_figures_come_from_their_endpoints(port):
    assert max_model_len(port) == 4096
    assert sglang.num_gpu_blocks(port) == 1000 // 16
    assert vllm.num_gpu_blocks(port) == 56851


def test_anything_but_a_json_object_reads_as_empty(port):
    assert http_json(port, "/list") == {} and http_json(port, "/text") == {}
    assert http_json(port, "/missing") == {}  # 404
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    assert http_json(closed, "/v1/models", timeout=1) == {}
