"""A stand-in for the Hugging Face Hub on 127.0.0.1, for the tests of `kvtier validate`'s Hub look-up.

It answers what huggingface_hub's hf_hub_download and get_hf_file_metadata ask (file_download.py, 2.4.0):
HEAD and GET of /{repo_id}/resolve/{revision}/{filename}, with X-Repo-Commit (the commit the revision is),
ETag and Content-Length on a file it has; and, as the Hub does, an X-Error-Code its client maps to an error
class: GatedRepo (401 without a token, 403 with one that has no access), RepoNotFound (404),
RevisionNotFound (404), EntryNotFound (404, with the commit). A repository may be slow: every answer waits
first, or only a download's (GET). The configs it serves are built from kvtier's shipped facts
(tools/kvtier/facts/models/*.yaml, real figures with their sources) or made by a test; no upstream file is
committed.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from kvtier import facts

NOT_CONFIG_KEYS = ("gated", "num_parameters")  # kvtier.facts adds them beside config.json's own keys


def shipped_config(name: str) -> dict[str, Any]:
    """config.json of a shipped model (by its facts file's name), as the facts data has it."""
    config = dict(facts.models()[name].config)
    for key in NOT_CONFIG_KEYS:
        config.pop(key, None)
    return config


def commit_of(*parts: Any) -> str:
    """A 40-hex commit id, the same for the same content (huggingface_hub checks the form)."""
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class Repo:
    files: dict[str, bytes]  # filename -> content, at every revision the repository has
    revisions: dict[str, str] = field(default_factory=dict)  # branch or tag -> commit; main is always there
    token: str | None = None  # gated: only this bearer token reads it
    delay_s: float = 0.0  # slow: every answer waits this long first
    body_delay_s: float = 0.0  # slow downloads: a GET's answer waits this long (HEAD answers at once)

    def commit(self, revision: str) -> str | None:
        main = commit_of(sorted(self.files.items(), key=lambda kv: kv[0]))
        known = {"main": main, **self.revisions}
        if revision in known:
            return known[revision]
        return revision if revision in known.values() else None


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    authorization: str


class StandInHub:
    """The stand-in: `repos` may change while it runs; `requests` lists what it was asked."""

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.requests: list[Request] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:
                hub._answer(self, body=False)

            def do_GET(self) -> None:
                hub._answer(self, body=True)

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet: the tests read `requests`

        self._stopping = threading.Event()
        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False  # a slow answer still waiting does not hold stop()
        # a short poll: stop() returns at once, not after serve_forever's default half second
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def add(
        self, repo_id: str, config: dict[str, Any], total_size: int | None = None, **settings: Any
    ) -> Repo:
        """A repository holding config.json (and a safetensors index of `total_size` bytes, if given)."""
        files = {"config.json": json.dumps(config, indent=2).encode()}
        if total_size is not None:
            index = {"metadata": {"total_size": total_size}, "weight_map": {}}
            files["model.safetensors.index.json"] = json.dumps(index).encode()
        self.repos[repo_id] = Repo(files, **settings)
        return self.repos[repo_id]

    def start(self) -> StandInHub:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop answering (once; a second call does nothing): the port then refuses connections."""
        if self._thread.is_alive():
            self._stopping.set()  # a slow answer still waiting ends now
            self._server.shutdown()
            self._server.server_close()

    def _answer(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        auth = handler.headers.get("Authorization") or ""
        self.requests.append(Request(handler.command, handler.path, auth))
        parts = handler.path.split("?")[0].split("/")
        # /{org}/{name}/resolve/{revision}/{filename...}
        if len(parts) < 6 or parts[3] != "resolve":
            return _send(handler, 404, {"X-Error-Code": "RepoNotFound"}, body)
        repo_id, revision, filename = f"{parts[1]}/{parts[2]}", unquote(parts[4]), "/".join(parts[5:])
        repo = self.repos.get(repo_id)
        if repo is None:
            return _send(handler, 404, {"X-Error-Code": "RepoNotFound"}, body)
        delay = repo.delay_s + (repo.body_delay_s if body else 0.0)
        if delay and self._stopping.wait(delay):
            return None  # stopped while waiting: the client gave up long ago
        if repo.token is not None and auth != f"Bearer {repo.token}":
            status = 403 if auth else 401
            return _send(handler, status, {"X-Error-Code": "GatedRepo", "X-Error-Message": "gated"}, body)
        commit = repo.commit(revision)
        if commit is None:
            return _send(handler, 404, {"X-Error-Code": "RevisionNotFound"}, body)
        content = repo.files.get(filename)
        if content is None:
            return _send(handler, 404, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": commit}, body)
        etag = hashlib.sha1(content).hexdigest()
        headers = {"X-Repo-Commit": commit, "ETag": f'"{etag}"', "Content-Type": "application/json"}
        return _send(handler, 200, headers, body, content)


def go_online(monkeypatch: Any, hub: StandInHub, cache: Path) -> None:
    """Point huggingface_hub at the stand-in for one test, with `cache` (the test's own) as its cache:
    HF_HUB_OFFLINE (the tests' default, tests/conftest.py) lifted in the environment and in the constant
    huggingface_hub read at import, no token of the user's, no proxy for loopback, nothing remembered of
    another test's Hub."""
    from huggingface_hub import constants

    from kvtier.validate import hub_facts

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    hub_facts.forget()


def go_offline(monkeypatch: Any) -> None:
    """HF_HUB_OFFLINE=1 again, as the test session has it."""
    from huggingface_hub import constants

    from kvtier.validate import hub_facts

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    hub_facts.forget()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # a client that gave up (a timeout under test) is no error of the stand-in


def _send(
    handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str], body: bool, content: bytes = b""
) -> None:
    handler.send_response(status)
    for name, value in headers.items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(content)))
    handler.end_headers()
    if body and content:
        handler.wfile.write(content)


def own_hub_cache(tmp_path: Path, monkeypatch: Any) -> Path:
    """A Hugging Face cache of the test's own, with validate's memory of configs and Hub answers cleared, so
    nothing a user or an earlier test cached is read."""
    from kvtier.validate import hub_facts, model_facts

    cache = tmp_path / "hub-cache"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    model_facts._read_found.cache_clear()
    model_facts.read_given.cache_clear()
    hub_facts.forget()
    return cache
