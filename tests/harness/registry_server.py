"""A real OCI registry (CNCF distribution, pinned in toolchain/versions.env) on loopback.

For the publishing tests and for trying `kvtier package` locally: it listens on 127.0.0.1 only,
keeps its blobs in a given directory and, with a user and a bcrypt hash, asks for basic auth.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests
import yaml

from kvtier import toolchain


@dataclass(frozen=True)
class LocalRegistry:
    host: str  # 127.0.0.1:<port>
    log: Path

    @property
    def url(self) -> str:
        return f"http://{self.host}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(workdir: Path, htpasswd: str | None = None, timeout: float = 30) -> Iterator[LocalRegistry]:
    """Run the registry until the block ends; htpasswd is `user:bcrypt-hash` (None: no auth)."""
    binary = toolchain.pinned("registry")
    workdir.mkdir(parents=True, exist_ok=True)
    host = f"127.0.0.1:{_free_port()}"
    config: dict = {
        "version": 0.1,
        "log": {"level": "info", "formatter": "text"},
        "storage": {"filesystem": {"rootdirectory": str(workdir / "data")}},
        "http": {"addr": host},
    }
    if htpasswd:
        (workdir / "htpasswd").write_text(htpasswd + "\n")
        config["auth"] = {"htpasswd": {"realm": "kvtier-test", "path": str(workdir / "htpasswd")}}
    (workdir / "config.yml").write_text(yaml.safe_dump(config))
    log = workdir / "registry.log"
    # No trace exporter: the registry's OpenTelemetry default would try to reach a collector.
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "none", "OTEL_SDK_DISABLED": "true"}
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(binary), "serve", str(workdir / "config.yml")], stdout=out, stderr=subprocess.STDOUT, env=env
        )
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                # /v2/ answers 200 (no auth) or 401 (auth) once the registry serves.
                if requests.get(f"http://{host}/v2/", timeout=2).status_code in (200, 401):
                    break
            except requests.ConnectionError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"registry did not start on {host}; log:\n{log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield LocalRegistry(host, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
