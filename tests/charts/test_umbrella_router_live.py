"""The router arguments the chart renders start the real vllm-router (PyPI build, runs on a CPU), for
every routing strategy, in static discovery mode: it becomes ready and serves the model list through
its own port and metrics on the metrics port. The engine is a stand-in (loopback HTTP server answering
/health and /v1/models): a real vLLM needs a GPU here. Kubernetes discovery is exercised on the KWOK
control plane by the cluster suite. Only loopback addresses are used; the chart's 0.0.0.0 binds are
rewritten to 127.0.0.1."""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
import yaml
from render import find, helm_bin, render_docs

from kvtier import helm, paths

CHART = paths.CHARTS / "kv-tiered-inference"
MODEL = "Qwen/Qwen2-7B-Instruct"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class StandInEngine(http.server.BaseHTTPRequestHandler):
    """Answers what the router asks an engine for at startup; records the paths."""

    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        StandInEngine.seen.append(self.path)
        if self.path == "/health":
            body = b""
        elif self.path.startswith("/v1/models"):
            body = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode()
        else:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def engine() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), StandInEngine)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError:
        return 0, b""


@pytest.mark.parametrize("strategy", ["prefixaware", "kvaware", "session", "roundrobin"])
def test_rendered_arguments_start_the_real_router(strategy: str, engine: str, tmp_path: Path, need) -> None:
    # The toolkit venv, else the engine rig's venv (toolchain/engine.sh installs the pinned router there).
    venvs = [paths.ROOT / ".venv" / "bin", paths.ROOT / ".venv-engine" / "bin"]
    router_bin = shutil.which("vllm-router", path=":".join(map(str, venvs)))
    need(router_bin is not None, "PyPI vllm-router not in the venv (make tools installs it)")
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    helm.build_dependencies(CHART)
    port, metrics_port = free_port(), free_port()
    worker = {"url": engine, "kvEvents": f"tcp://127.0.0.1:{free_port()}"}
    values = tmp_path / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "routing": {"strategy": strategy},
                "router": {
                    "port": port,
                    "metricsPort": metrics_port,
                    "discovery": {"mode": "static", "staticWorkers": {"qwen2-7b": [worker]}},
                },
            }
        )
    )
    docs = render_docs(CHART, values=[values])
    (router,) = [d for d in find(docs, "Deployment") if d["metadata"]["name"].endswith("-router")]
    container = router["spec"]["template"]["spec"]["containers"][0]
    args = [("127.0.0.1" if a == "0.0.0.0" else a) for a in container["args"]]
    assert container["command"] == ["vllm-router"]
    log = (tmp_path / "router.log").open("w")
    process = subprocess.Popen([router_bin, *args], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline, status = time.monotonic() + 60, 0
        while time.monotonic() < deadline and status != 200:
            assert process.poll() is None, (tmp_path / "router.log").read_text()[-3000:]
            status, _ = get(f"http://127.0.0.1:{port}/readiness")
            time.sleep(0.3)
        assert status == 200, (tmp_path / "router.log").read_text()[-3000:]
        assert get(f"http://127.0.0.1:{port}/liveness")[0] == 200
        status, body = get(f"http://127.0.0.1:{port}/v1/models")
        assert status == 200 and [m["id"] for m in json.loads(body)["data"]] == [MODEL]
        status, body = get(f"http://127.0.0.1:{metrics_port}/metrics")
        assert status == 200 and f'worker="{engine}"' in body.decode()
        assert "/health" in StandInEngine.seen
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
