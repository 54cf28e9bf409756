"""Render a chart through the pinned Helm binary, per template, the way helm-unittest sees it.

One `helm template` run per distinct (chart copy, values, release, capabilities); results are cached
for the pytest session. On success every kept template's raw output comes from the probe template
(see chartcopy); on failure the error is Helm's own text, which helm-unittest then reduces.
"""

from __future__ import annotations

import base64
import hashlib
import re
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from kvtier.unittest_plugin import chartcopy, goemit

DEFAULT_KUBE = ("1", "20")  # helm-unittest's Helm library default when built without ldflags
_VALID_RELEASE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SOURCE = re.compile(r"^# Source: (.+)$", re.M)


@dataclass(frozen=True)
class RenderRequest:
    chart_dir: Path
    target_route: str
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    overrides: tuple[tuple[str, str], ...]
    release_name: str
    namespace: str
    revision: int
    upgrade: bool
    kube_major: str
    kube_minor: str
    api_versions: tuple[str, ...]
    values_yaml: str


@dataclass
class RenderResult:
    files: dict[str, str] = field(default_factory=dict)  # template name -> raw output
    error: str | None = None  # Helm's error text (without "Error: ") when rendering failed


class Renderer:
    """Renders requests with one Helm binary, caching results for the session."""

    def __init__(self, helm: Path, workdir: Path) -> None:
        self.helm, self.workdir = helm, workdir
        self._cache: dict[RenderRequest, RenderResult] = {}
        self._locks: dict[RenderRequest, threading.Lock] = {}
        self._guard = threading.Lock()
        self._copying = threading.Lock()  # chart copies are shared between requests
        self.runs = 0

    def render(self, req: RenderRequest) -> RenderResult:
        with self._guard:
            lock = self._locks.setdefault(req, threading.Lock())
        with lock:
            if req not in self._cache:
                self._cache[req] = self._render(req)
            return self._cache[req]

    def _render(self, req: RenderRequest) -> RenderResult:
        name = req.release_name if _VALID_RELEASE.match(req.release_name) else req.release_name.lower()
        if not _VALID_RELEASE.match(name):
            name = "release-name"
        release = {
            "Name": req.release_name,
            "Namespace": req.namespace,
            "Revision": req.revision,
            "IsInstall": not req.upgrade,
            "IsUpgrade": req.upgrade,
        }
        with self._copying:
            copy = chartcopy.prepare_copy(
                self.workdir / "charts",
                req.chart_dir,
                req.target_route,
                list(req.include),
                list(req.exclude),
                dict(req.overrides),
                release,
            )
            digest = hashlib.sha256(req.values_yaml.encode()).hexdigest()[:16]
            values_file = self.workdir / "values" / f"{digest}.yaml"
            values_file.parent.mkdir(parents=True, exist_ok=True)
            if not values_file.exists():
                values_file.write_text(req.values_yaml)
        cmd = [str(self.helm), "template", name, str(copy), "--namespace", req.namespace]
        cmd += ["--kube-version", f"v{req.kube_major}.{req.kube_minor}.0", "-f", str(values_file)]
        for api in req.api_versions:
            cmd += ["--api-versions", api]
        if req.upgrade:
            cmd.append("--is-upgrade")
        self.runs += 1
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        if proc.returncode != 0:
            return RenderResult(error=_helm_error(proc.stderr, name, req.release_name))
        return RenderResult(files=_probe_files(proc.stdout))


def _helm_error(stderr: str, used_name: str, wanted_name: str) -> str:
    text = stderr.strip()
    text = re.sub(r"\n*Use --debug flag to render out invalid YAML\s*$", "", text)
    text = text.removeprefix("Error: ")
    if used_name != wanted_name:
        text = text.replace(f'"{used_name}"', f'"{wanted_name}"')
    return text


def _probe_files(stdout: str) -> dict[str, str]:
    files: dict[str, str] = {}
    sources = list(_SOURCE.finditer(stdout))
    for i, match in enumerate(sources):
        if not match.group(1).endswith("/" + chartcopy.PROBE):
            continue
        end = sources[i + 1].start() if i + 1 < len(sources) else len(stdout)
        doc = yaml.load(stdout[match.end() : end].rsplit("\n---", 1)[0], Loader=yaml.CSafeLoader) or {}
        for template, encoded in (doc.get(chartcopy.PROBE_KEY) or {}).items():
            raw = base64.b64decode(encoded or "").decode("utf-8", errors="replace")
            files[template] = raw.replace("<no value>", "")
    return files


def values_document(values: dict[str, object]) -> str:
    """User values as YAML for `helm template -f` (yaml.v3 spelling, so types survive).

    A time.Time reaches Helm as its RFC 3339 text (helm-unittest marshals values through JSON)."""
    return goemit.dump(_plain_strings(values))


def _plain_strings(value: object) -> object:
    if isinstance(value, dict):
        return {k: _plain_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_strings(v) for v in value]
    return str(value) if isinstance(value, str) else value
