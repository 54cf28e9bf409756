"""Render a chart through the pinned Helm binary, per template, the way helm-unittest sees it.

One `helm template` run per distinct (chart copy, values, release, capabilities); results are cached
for the pytest session. On success every kept template's raw output comes from the probe template
(see chartcopy); on failure the error is Helm's own text, which helm-unittest then reduces.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from pytest_helm_unittest import batch, chartcopy, goemit
from pytest_helm_unittest.request import RenderRequest, RenderResult

DEFAULT_KUBE = ("1", "20")  # helm-unittest's Helm library default when built without ldflags
_VALID_RELEASE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SOURCE = re.compile(r"^# Source: (.+)$", re.M)
_PARSE_ERROR = re.compile(r"^Error: YAML parse error on ", re.M)  # Helm's SortManifests, after rendering


class Renderer:
    """Renders requests with one Helm binary, caching results for the session."""

    def __init__(self, helm: Path, workdir: Path) -> None:
        self.helm, self.workdir = helm, workdir
        self._cache: dict[RenderRequest, RenderResult] = {}
        self._locks: dict[RenderRequest, threading.Lock] = {}
        self._guard = threading.Lock()
        self._copying = threading.Lock()  # chart copies are shared between requests
        self.runs = 0
        self.batch_rejects = 0  # batches whose self-check failed (rendered one by one instead)
        self.prefetch_failures = 0  # up-front renders that raised (each case then renders on its own)

    def render(self, req: RenderRequest) -> RenderResult:
        with self._guard:
            lock = self._locks.setdefault(req, threading.Lock())
        with lock:
            if req not in self._cache:
                self._cache[req] = self._render(req)
            return self._cache[req]

    def _render(self, req: RenderRequest) -> RenderResult:
        copy = self._copy(req, batched=False)
        values = self._values_file(req.values_yaml)
        proc = self._helm(req, copy, values)
        if proc.returncode != 0 and _PARSE_ERROR.search(proc.stderr):
            # Every template rendered; only Helm's manifest parse failed, on output helm-unittest never
            # parses (a .txt it reads as text, say) or parses itself. `--debug` prints all the output,
            # the probe included, and the case's own parse decides as helm-unittest's would.
            files = _probe_files(self._helm(req, copy, values, "--debug").stdout)
            if files:
                return RenderResult(files=files)
        if proc.returncode != 0:
            return RenderResult(
                error=_helm_error(proc.stderr, _release_arg(req.release_name), req.release_name)
            )
        return RenderResult(files=_probe_files(proc.stdout))

    def _copy(self, req: RenderRequest, batched: bool) -> Path:
        release = {
            "Name": req.release_name,
            "Namespace": req.namespace,
            "Revision": req.revision,
            "IsInstall": not req.upgrade,
            "IsUpgrade": req.upgrade,
        }
        # what `helm template` serves otherwise than helm-unittest, rewritten into the copy (tplrewrite)
        rewrites = chartcopy.Rewrites(
            apis=req.api_versions if chartcopy.reads_api_versions(req.chart_dir) else None,
            release_name=req.release_name if _release_arg(req.release_name) != req.release_name else None,
            lookup_define=req.lookup_define,
        )
        with self._copying:
            return chartcopy.prepare_copy(
                self.workdir / "charts",
                req.chart_dir,
                req.target_route,
                list(req.include),
                list(req.exclude),
                dict(req.overrides),
                release,
                batch=batched,
                rewrites=rewrites,
            )

    def _values_file(self, text: str) -> Path:
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        path = self.workdir / "values" / f"{digest}.yaml"
        with self._copying:
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists():
                path.write_text(text)
        return path

    def _helm(
        self, req: RenderRequest, copy: Path, values_file: Path, *extra: str
    ) -> subprocess.CompletedProcess[str]:
        cmd = [
            str(self.helm),
            "template",
            _release_arg(req.release_name),
            str(copy),
            "--namespace",
            req.namespace,
        ]
        cmd += ["--kube-version", f"v{req.kube_major}.{req.kube_minor}.0", "-f", str(values_file), *extra]
        for api in req.api_versions:
            cmd += ["--api-versions", api]
        if req.upgrade:
            cmd.append("--is-upgrade")
        self.runs += 1
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)

    def prefetch(self, requests: set[RenderRequest], singles: set[RenderRequest], workers: int) -> None:
        """Render everything up front: `singles` one by one, the rest in batches where possible."""
        safe: dict[Path, bool] = {}
        groups: dict[RenderRequest, list[RenderRequest]] = {}
        for req in sorted(requests - singles, key=lambda r: r.values_yaml):
            if req.chart_dir not in safe:
                safe[req.chart_dir] = batch.include_safe(req.chart_dir)
            groups.setdefault(batch.group_key(req, safe[req.chart_dir]), []).append(req)
        tasks: list[Callable[[], object]] = [functools.partial(self.render, r) for r in singles]
        tasks += [functools.partial(self._batch, key, members) for key, members in groups.items()]
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            for future in [pool.submit(t) for t in tasks]:
                # Only a head start: a render that raises here (a Helm run past its timeout on a loaded
                # machine) must not end the session with every case unrun. Nothing was cached for it, so
                # each case renders again on its own and reports its own error, as helm-unittest would.
                try:
                    future.result()
                except Exception:
                    self.prefetch_failures += 1

    def _batch(self, key: RenderRequest, members: list[RenderRequest]) -> None:
        if len(members) < 2:
            self.render(members[0])
            return
        copy = self._copy(key, batched=True)
        desc = batch.descriptor(copy)
        if desc is None:
            for req in members:
                self.render(req)
            return
        users = batch.members_of(members)
        by_condition: dict[str, list[int]] = {}
        for i, user in enumerate(users):
            by_condition.setdefault(batch.condition_key(user, desc), []).append(i)
        for indexes in by_condition.values():
            self._batch_run(key, [members[i] for i in indexes], [users[i] for i in indexes], copy, desc)

    def _batch_run(
        self,
        key: RenderRequest,
        reqs: list[RenderRequest],
        users: list[dict[str, Any]],
        copy: Path,
        desc: Any,
    ) -> None:
        """One helm run for all members; halves on failure (some member's values make Helm fail)."""
        select = batch.selection(reqs, batch.templates_of(copy))
        text = batch.batch_values(users, desc, select) if len(reqs) > 1 else None
        proc = self._helm(key, copy, self._values_file(text), "--skip-schema-validation") if text else None
        if proc is None or proc.returncode != 0:
            if len(reqs) > 3:
                half = len(reqs) // 2
                self._batch_run(key, reqs[:half], users[:half], copy, desc)
                self._batch_run(key, reqs[half:], users[half:], copy, desc)
            else:
                for req in reqs:
                    self.render(req)
            return
        files, values = batch.parse(proc.stdout, len(reqs))
        if not batch.accept(self.render(reqs[0]), batch.selected(reqs[0], files[0])):
            self.batch_rejects += 1
            for req in reqs[1:]:
                self.render(req)
            return
        for req, member_files, member_values in zip(reqs[1:], files[1:], values[1:], strict=True):
            if all(batch.schema_ok(copy, vals, path) for path, vals in member_values.items()):
                with self._guard:
                    self._cache.setdefault(req, RenderResult(files=batch.selected(req, member_files)))
            else:
                self.render(req)


def valid_release_name(name: str) -> bool:
    """Helm's ValidateReleaseName: a DNS-1123 subdomain of at most 53 characters."""
    return len(name) <= 53 and _VALID_RELEASE.fullmatch(name) is not None


def _release_arg(name: str) -> str:
    """A name `helm template` accepts; the probe gives templates the real one."""
    if _VALID_RELEASE.match(name):
        return name
    return name.lower() if _VALID_RELEASE.match(name.lower()) else "release-name"


def _helm_error(stderr: str, used_name: str, wanted_name: str) -> str:
    text = stderr.strip()
    # Helm logs warnings (a non-bool tag, say) before its error; helm-unittest's error has none of them
    start = text.find("\nError: ")
    if not text.startswith("Error: ") and start >= 0:
        text = text[start + 1 :]
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
