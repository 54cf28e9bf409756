"""Stand-in HTTP servers on 127.0.0.1 for the checks' error paths (imported by the kvcheck/smoke/bench tests).

They stand in for a vLLM replica, the router and a Curvine master only where the real ones cannot
misbehave on purpose (refused connections, timeouts, non-streaming answers, missing metrics). The
real engines and router are exercised in tests/engine/.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, str, bytes | list[bytes]]  # status, content type, body (a list = streamed chunks)
Route = Callable[[dict[str, Any]], Reply]


def as_json(obj: Any, status: int = 200) -> Route:
    return lambda _request: (status, "application/json", json.dumps(obj).encode())


def as_text(text: str, status: int = 200) -> Route:
    return lambda _request: (status, "text/plain", text.encode())


def sse(*events: dict[str, Any]) -> list[bytes]:
    """Server-sent events as an OpenAI-compatible server streams them, ending with [DONE]."""
    return [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]


def token(text: str = "x") -> dict[str, Any]:
    return {"choices": [{"index": 0, "text": text}]}


class _Handler(BaseHTTPRequestHandler):
    server: FakeServer

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def _reply(self, method: str) -> None:
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}") if length else {}
        self.server.seen.append((method, path))
        route = self.server.routes.get((method, path))
        if route is None:
            status, kind, payload = 404, "text/plain", b"not found"
        else:
            status, kind, payload = route(body)
        if self.server.delay_s:
            time.sleep(self.server.delay_s)
        self.send_response(status)
        self.send_header("Content-Type", kind)
        if isinstance(payload, list):
            self.end_headers()
            for index, chunk in enumerate(payload):
                if index == 0 and self.server.first_chunk_delay_s:
                    time.sleep(self.server.first_chunk_delay_s)
                self.wfile.write(chunk)
                self.wfile.flush()
            return
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a client that timed out
            self._reply("GET")

    def do_POST(self) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._reply("POST")


class FakeServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, routes: dict[tuple[str, str], Route]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.routes = routes
        self.seen: list[tuple[str, str]] = []
        self.delay_s = 0.0
        self.first_chunk_delay_s = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextmanager
def serve(routes: dict[tuple[str, str], Route]) -> Iterator[FakeServer]:
    server = FakeServer(routes)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def closed_port_url() -> str:
    """A loopback URL nobody listens on (bound, then released)."""
    server = FakeServer({})
    url = server.url
    server.server_close()
    return url


class FakeReplica:
    """A stand-in vLLM replica: streams completions and counts them in its /metrics.

    `hit_tokens` is what one request adds to the external (LMCache) hit counter; None = no such metric.
    With a shared `l2` (a set of prompts), a request hits only when its prompt is there, and each prompt
    lands there `write_s` seconds after its answer, as vLLM's cascade to its fs tier does; the replica
    then exports that tier's write counter and its gauge of writes under way.
    """

    def __init__(
        self, hit_tokens: int | None = 0, l2: set[str] | None = None, write_s: float | None = None
    ) -> None:
        self.requests = 0
        self.hit_tokens = hit_tokens
        self.external_hits = 0
        self.l0_hits = 0
        self.seen: set[str] = set()
        self.l2, self.write_s = l2, write_s
        self.writes: list[tuple[float, str]] = []  # (when it lands, prompt)
        self.lock = threading.Lock()

    def _land_writes(self) -> tuple[int, int]:
        """Writes landed and under way now; the landed ones' prompts join the shared L2."""
        with self.lock:
            now = time.monotonic()
            landed = [prompt for when, prompt in self.writes if when <= now]
            if self.l2 is not None:
                self.l2.update(landed)
            return len(landed), len(self.writes) - len(landed)

    def complete(self, request: dict[str, Any]) -> Reply:
        """Like a prefix cache: a prompt seen before counts its words as L0 hit tokens."""
        self.requests += 1
        prompt = str(request.get("prompt", ""))
        if prompt in self.seen:
            self.l0_hits += len(prompt.split())
        self.seen.add(prompt)
        self._land_writes()
        if self.hit_tokens is not None and (self.l2 is None or prompt in self.l2):
            self.external_hits += self.hit_tokens
        if self.write_s is not None:
            with self.lock:
                self.writes.append((time.monotonic() + self.write_s, prompt))
        return 200, "text/event-stream", sse(token("a"), token("b"))

    def _metrics(self, _request: dict[str, Any]) -> Reply:
        lines = [
            "# TYPE vllm:request_success_total counter",
            f'vllm:request_success_total{{finished_reason="length",model_name="m"}} {self.requests}.0',
            f'vllm:prefix_cache_queries_total{{model_name="m"}} {self.requests * 100}.0',
            f'vllm:prefix_cache_hits_total{{model_name="m"}} {self.l0_hits}.0',
        ]
        if self.hit_tokens is not None:
            lines.append(f"lmcache:num_hit_tokens_total {self.external_hits}.0")
        if self.write_s is not None:
            landed, under_way = self._land_writes()
            lines += [
                f'vllm:kv_offload_tiering_write_bytes_total{{tier="1:fs"}} {landed * 4096}.0',
                f'vllm:kv_offload_tiering_active_cascade_jobs{{tier="1:fs"}} {under_way}.0',
            ]
        return 200, "text/plain", "\n".join(lines).encode()

    def routes(self) -> dict[tuple[str, str], Route]:
        return {("POST", "/v1/completions"): self.complete, ("GET", "/metrics"): self._metrics}
