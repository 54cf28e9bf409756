"""Tenant isolation by `cache_salt` on every tier, measured on the real engines (issue 36, items 1-2).

Per backend, two replicas started from values/cpu.yaml's rendered container (kvtier.engine_rig.tiers) serve
one prompt under several salts; each step reads the engine's own counters: L0 hit tokens (vLLM's prefix
cache) and connector hit tokens (what LMCache's L1/L2 or the native CPU and fs tiers supplied). Across
salts nothing may hit, on the same replica (L0, L1) or on the other one (L2); within one salt the other
replica must load every whole chunk from L2 and the same replica must hit L0, so a tier that stopped
storing or keying at all fails here too. Each cross-salt step uses a salt never seen before: a salt that
was served once has its own chunks on the shared L2, and a later request with it hits them rightly.

The lmcache backend runs tools/kvtier/podscripts/tenant_salt.py's connector, as the chart renders it with
`cache.tenantIsolation` (the default); the native backend keys its tiers on vLLM's salted block hashes
and needs nothing. The router forwards the salt unchanged (checked against a stub worker).
"""

from __future__ import annotations

import json
import secrets
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from kvtier.engine_rig import processes, rendered, router_flags, tiers
from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig.errors import RigError
from kvtier.podscripts import kvcheck, tenant_salt


def test_the_chart_renders_the_salt_connector_for_lmcache(tmp_path) -> None:
    """What the rig below runs: the chart's lmcache engine names the salt connector and imports it from the
    podscripts mount; the native engine keeps vLLM's own connector."""
    salted = rendered.render_engine([tiers.CPU_VALUES], tiers.rig_overlay(256, "lmcache"), tmp_path / "l")
    transfer = json.loads(salted.args[salted.args.index("--kv-transfer-config") + 1])
    assert (transfer["kv_connector"], transfer["kv_connector_module_path"]) == (
        tenant_salt.CONNECTOR,
        tenant_salt.MODULE,
    )
    assert salted.env["PYTHONPATH"] == salted.mounts["podscripts"]
    native = rendered.render_engine([tiers.CPU_VALUES], tiers.rig_overlay(256, tiers.NATIVE), tmp_path / "n")
    assert (
        json.loads(native.args[native.args.index("--kv-transfer-config") + 1])["kv_connector"]
        == "OffloadingConnector"
    )


@dataclass(frozen=True)
class Hits:
    step: str
    replica: int
    l0: int
    connector: int
    text: str


def ask_salted(rig: tiers.TieredRig, replica: int, prompt: str, salt: str | None, step: str) -> Hits:
    """One greedy completion with `salt` as its cache_salt; the hit tokens it added to each counter."""
    url = rig.started[replica].url
    before = kvcheck.read_metrics(url + "/metrics")
    body: dict[str, Any] = {"model": engine_rig.MODEL_NAME, "prompt": prompt, "max_tokens": 4}
    body |= {"temperature": 0} | ({"cache_salt": salt} if salt else {})
    request = urllib.request.Request(
        url + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=300) as response:  # loopback only
        text = json.loads(response.read())["choices"][0]["text"]
    after = kvcheck.read_metrics(url + "/metrics")

    def added(name: str) -> int:
        return int(after.get(name, 0.0) - before.get(name, 0.0))

    return Hits(
        step, replica, added("vllm:prefix_cache_hits"), added("vllm:external_prefix_cache_hits"), text
    )


def settle(rig: tiers.TieredRig, count: int) -> None:
    """Wait until `count` chunk files are on L2 (stores finish after the answer). A tier that did not
    store them lets the hit assertions say so, not a timeout here."""
    try:
        rig.wait_for_chunks(count, timeout_s=30)
    except RigError as error:
        print(f"note: {error}")


@pytest.fixture(
    scope="module",
    params=[pytest.param(b, marks=pytest.mark.tiered_rig(b), id=b) for b in ("lmcache", tiers.NATIVE)],
)
def measured(request: pytest.FixtureRequest, tiered_rig) -> dict:
    """The steps on the backend's shared rig (other modules' KV is on it too, under other nonces)."""
    backend: str = request.param
    rig = tiered_rig(backend)
    warm = kvcheck.long_prompt(600)  # each engine's first request and L2 load pay one-off set-up
    before = len(rig.chunk_files())
    ask_salted(rig, 0, warm, None, "warm-up")
    settle(rig, before + tiers.prompt_tokens(rig.started[0].url, warm) // rig.chunk_size)
    ask_salted(rig, 1, warm, None, "warm-up")
    prompt = kvcheck.long_prompt(1500)
    tokens = tiers.prompt_tokens(rig.started[0].url, prompt)
    per_salt = tokens // rig.chunk_size
    a, b, c = (secrets.token_urlsafe(32) for _ in range(3))
    steps: list[Hits] = []
    present = len(rig.chunk_files())
    steps.append(ask_salted(rig, 0, prompt, a, "A cold (replica 0)"))
    settle(rig, present + per_salt)
    steps.append(ask_salted(rig, 0, prompt, b, "B after A (same replica)"))
    settle(rig, present + 2 * per_salt)  # B's own chunks, for the within-B step below
    steps.append(ask_salted(rig, 1, prompt, c, "C after A, B (other replica)"))
    steps.append(ask_salted(rig, 1, prompt, None, "unsalted after A, B, C (other replica)"))
    steps.append(ask_salted(rig, 1, prompt, a, "A again (other replica)"))
    steps.append(ask_salted(rig, 1, prompt, b, "B again (other replica)"))
    steps.append(ask_salted(rig, 0, prompt, a, "A again (same replica)"))
    settle(rig, present + 4 * per_salt)  # A, B, C and unsalted: one copy each
    files = [path.name for path in rig.chunk_files()]
    print(f"\n{backend}: {tokens} prompt tokens, chunk {rig.chunk_size}")
    for s in steps:
        print(f"  {s.step:<40} replica {s.replica}: L0 {s.l0:>5}  connector {s.connector:>5}")
    return {
        "backend": backend,
        "tokens": tokens,
        "chunk": rig.chunk_size,
        "steps": {s.step: s for s in steps},
        "salts": {"A": a, "B": b, "C": c},
        "stored": len(files) - present,
        "per_salt": per_salt,
        "files": files,
    }


def test_another_salt_gets_no_hit_on_the_same_replica(measured: dict) -> None:
    step = measured["steps"]["B after A (same replica)"]
    assert (step.l0, step.connector) == (0, 0), f"{measured['backend']}: tenant B served A's KV: {step}"


def test_another_salt_gets_no_hit_on_the_other_replica(measured: dict) -> None:
    steps = measured["steps"]
    for name in ("C after A, B (other replica)", "unsalted after A, B, C (other replica)"):
        assert (steps[name].l0, steps[name].connector) == (0, 0), f"{measured['backend']}: {steps[name]}"


def test_the_same_salt_loads_every_whole_chunk_on_the_other_replica(measured: dict) -> None:
    whole = measured["tokens"] // measured["chunk"] * measured["chunk"]
    cold = measured["steps"]["A cold (replica 0)"]
    for name in ("A again (other replica)", "B again (other replica)"):
        step = measured["steps"][name]
        assert (step.l0, step.connector) == (0, whole), (
            f"{measured['backend']}: {step}, expected {whole} from L2"
        )
        assert step.text == cold.text, "greedy output differs between the cold and the L2-hit path"


def test_the_same_salt_hits_l0_on_the_same_replica(measured: dict) -> None:
    step = measured["steps"]["A again (same replica)"]
    whole = measured["tokens"] // measured["chunk"] * measured["chunk"]
    assert step.l0 >= whole and step.connector == 0, f"{measured['backend']}: {step}"


class _StubWorker(BaseHTTPRequestHandler):
    """A worker that answers every request and keeps the JSON bodies it was sent."""

    bodies: ClassVar[list[tuple[str, dict]]] = []
    authorizations: ClassVar[list[tuple[str, str | None]]] = []

    def log_message(self, *_args: object) -> None:
        return

    def _answer(self) -> None:
        models = [{"id": engine_rig.MODEL_NAME, "object": "model"}]
        choices = [{"index": 0, "text": "ok", "finish_reason": "stop"}]
        body = json.dumps({"object": "list", "data": models, "choices": choices}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.authorizations.append((self.path, self.headers.get("Authorization")))
        self._answer()

    def do_POST(self) -> None:
        self.authorizations.append((self.path, self.headers.get("Authorization")))
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.bodies.append((self.path, json.loads(raw)))
        self._answer()


@contextmanager
def router_before_stub(tmp_path, need, *extra: str) -> Iterator[str]:
    """The real vllm-router, with the chart's prefix-aware flags plus `extra`, in front of a _StubWorker
    (whose records start empty); yields the router's URL."""
    try:
        engine_rig.engine_python()
    except RigError as error:
        need(False, f"engine rig unavailable: {error}")
    _StubWorker.bodies.clear()
    _StubWorker.authorizations.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StubWorker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        flags, _source = router_flags.router_flags("prefixaware")
        port = processes.free_port()
        worker = f"http://127.0.0.1:{server.server_address[1]}"
        argv = [*engine_rig.router_argv(flags, [worker], port, processes.free_port()), *extra]
        with engine_rig.running_router(argv, port, "stub", tmp_path) as url:
            yield url
    finally:
        server.shutdown()


def complete(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    """One completion through the router (loopback only)."""
    sent = {"model": engine_rig.MODEL_NAME, "prompt": "hello", "max_tokens": 2} | body
    request = urllib.request.Request(
        url + "/v1/completions",
        json.dumps(sent).encode(),
        {"Content-Type": "application/json"} | (headers or {}),
    )
    with urllib.request.urlopen(request, timeout=30):
        pass


def test_the_router_forwards_the_salt_unchanged(tmp_path, need) -> None:
    """vllm-router with the chart's flags re-serialises the body it forwards; the salt (any characters
    vLLM accepts) must arrive as the client sent it, or the engines would key on something else."""
    salt = "tenant A: %20 ünïcode + spaces"
    with router_before_stub(tmp_path, need) as url:
        complete(url, {"cache_salt": salt})
    forwarded = [sent for path, sent in _StubWorker.bodies if path == "/v1/completions"]
    assert forwarded, f"the router sent no completion to the worker: {_StubWorker.bodies}"
    assert all(sent.get("cache_salt") == salt for sent in forwarded), forwarded


def test_each_salt_stores_its_own_chunks_on_l2(measured: dict) -> None:
    """Isolation by construction: A, B, C and the unsalted request each wrote the prompt's chunks under
    their own names (a shared name would be one copy), and no file name shows a salt."""
    assert measured["stored"] == 4 * measured["per_salt"], measured["files"]
    salts = measured["salts"].values()
    assert not [name for name in measured["files"] if any(salt in name for salt in salts)]
    if measured["backend"] == "lmcache":  # the connector's tag, digested, in LMCache's key string
        for salt in salts:
            tagged = [n for n in measured["files"] if f"@cache_salt%{tenant_salt.salt_tag(salt)}" in n]
            assert len(tagged) == measured["per_salt"], measured["files"]


def test_the_router_passes_the_clients_key_on_and_uses_its_own_for_its_calls(tmp_path, need) -> None:
    """auth.apiKeySecret: the engines refuse /v1 without the key. The pinned vllm-router forwards a request
    with the client's Authorization header as it came (none stays none, so the engine refuses an anonymous
    client), and presents its own `--api-key` (the chart's `$(VLLM_API_KEY)`) only on the calls it makes
    itself: the prefix-aware policy's /render."""
    with router_before_stub(tmp_path, need, "--api-key", "k3y") as url:
        complete(url, {})
        complete(url, {}, {"Authorization": "Bearer client"})
    seen = _StubWorker.authorizations
    assert [auth for path, auth in seen if path == "/v1/completions"] == [None, "Bearer client"], seen
    renders = [auth for path, auth in seen if path == "/v1/completions/render"]
    assert renders and set(renders) == {"Bearer k3y"}, seen
