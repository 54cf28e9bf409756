"""Running the pinned Helm: one place that knows how to call it, how to prepare a chart and how to
render one (`Template`: validate, preflight and the engine rig all render through it)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kvtier import helmyaml, toolchain
from kvtier.errors import UserError

PINNED_MAJORS = (3, 4)  # the Helms toolchain/versions.env pins
TEMPLATE_TIMEOUT_S = 120


def run(
    args: list[str], *, major: int = 3, check: bool = False, timeout: int = 300
) -> subprocess.CompletedProcess[str]:
    """`helm <args>` with the pinned Helm of that major version; output captured as text."""
    binary = toolchain.helm(major, allow_override=False)
    return subprocess.run([str(binary), *args], capture_output=True, text=True, check=check, timeout=timeout)


def dependencies_current(chart: Path) -> bool:
    """Whether every file:// dependency of a chart is packaged in its charts/, once, at the version
    Chart.yaml asks for, and newer than its source."""
    meta = yaml.safe_load((chart / "Chart.yaml").read_text()) or {}
    for dep in meta.get("dependencies") or []:
        repo = dep.get("repository", "")
        if not repo.startswith("file://"):
            continue
        source = (chart / repo.removeprefix("file://")).resolve()
        packaged = sorted((chart / "charts").glob(f"{dep['name']}-*.tgz"))
        if len(packaged) != 1 or packaged[0].name != f"{dep['name']}-{dep.get('version')}.tgz":
            return False  # missing, an older version left beside it (Helm would load both), or a bump
        newest_source = max(p.stat().st_mtime for p in source.rglob("*") if p.is_file())
        if packaged[0].stat().st_mtime < newest_source:
            return False
    return True


def build_dependencies(chart: Path, *, major: int = 3) -> None:
    """Package the file:// dependencies when one is missing, stale or of another version. `dependency
    update` (not `build`): after a version bump the Chart.lock of an earlier build is out of sync, which
    `build` refuses; update rewrites it and replaces the old package."""
    if not dependencies_current(chart):
        run(["dependency", "update", str(chart), "--skip-refresh"], major=major, check=True)


def majors(option: str) -> tuple[int, ...]:
    """Helm major versions from a `--helm 3,4` option; a UserError for anything else."""
    try:
        chosen = tuple(int(m) for m in option.split(",") if m.strip())
    except ValueError:
        chosen = ()
    if not chosen or not set(chosen) <= set(PINNED_MAJORS):
        raise UserError(f"--helm {option!r}: expected pinned Helm majors like 3 or 3,4") from None
    return chosen


class TemplateError(UserError):
    """`helm template` refused (a chart `fail`, values its schema rejects), timed out, or printed YAML that
    does not parse. The message is Helm's own, without its noise (clean_error)."""


@dataclass(frozen=True)
class Rendered:
    manifests: list[dict[str, Any]]  # every non-empty document
    sources: list[str]  # the template each manifest came from (Helm's "# Source:" line), "" if none


@dataclass(frozen=True)
class Template:
    """One `helm template`: the values files in order, then `overlay` (more -f and --set arguments).
    `allow_override`: KVTIER_HELM may replace the pinned Helm (the user's commands; never the tests' own
    renders)."""

    chart: Path
    release: str
    values: Sequence[Path] = ()
    overlay: Sequence[str] = ()
    namespace: str | None = None
    kube_version: str | None = None
    api_versions: Sequence[str] = ()
    major: int = 3
    allow_override: bool = False

    def command(self) -> list[str]:
        argv = [str(toolchain.helm(self.major, allow_override=self.allow_override)), "template", self.release]
        argv.append(str(self.chart))
        for file in self.values:
            argv += ["-f", str(file)]
        argv += list(self.overlay)
        if self.namespace is not None:
            argv += ["--namespace", self.namespace]
        if self.kube_version is not None:
            argv += ["--kube-version", self.kube_version]
        for api_version in self.api_versions:
            argv += ["--api-versions", api_version]
        return argv

    def render(self, *, shared: bool = False, timeout: int = TEMPLATE_TIMEOUT_S) -> Rendered:
        """Run it and parse what Helm printed as the API server reads YAML. `shared`: documents may come
        from a cache shared with other renders (validate renders the same documents many times); such
        documents must never be changed. Raises TemplateError."""
        try:
            result = subprocess.run(
                self.command(), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired:
            raise TemplateError(f"helm template took more than {timeout} s") from None
        if result.returncode != 0:
            raise TemplateError(clean_error(result.stderr))
        try:
            return split(result.stdout, shared=shared)
        except yaml.YAMLError as error:
            raise TemplateError(f"Helm rendered invalid YAML: {error}") from None


def clean_error(stderr: str) -> str:
    """Helm's error without the noise: the `fail` message and the template it came from."""
    lines = [line for line in stderr.strip().splitlines() if line.strip() and not line.startswith("WARNING")]
    text = " ".join(lines) or "helm failed without a message"
    text = re.sub(r"^Error: ", "", text)
    text = re.sub(r"\s*Use --debug flag to render out invalid YAML\s*$", "", text)
    return text[:800]


# Document text -> parsed document, for shared renders: Helm 3 and 4, and environments, render many
# identical documents (less than half of them are unique over values/), each parsed once.
_parsed: dict[str, Any] = {}
_PARSED_MAX = 4096


def _document(chunk: str, shared: bool) -> Any:
    if not shared:
        return yaml.load(chunk, Loader=helmyaml.Loader)
    doc = _parsed.get(chunk)
    if doc is None:
        if len(_parsed) >= _PARSED_MAX:  # a long-lived process (the test suite) renders without end
            _parsed.clear()
        doc = _parsed[chunk] = yaml.load(chunk, Loader=helmyaml.Loader)
    return doc


def split(text: str, *, shared: bool = False) -> Rendered:
    """The documents of `helm template` output, with the template each came from (see Template.render)."""
    manifests, sources = [], []
    for chunk in re.split(r"^---\s*$", text, flags=re.M):
        source = re.search(r"^# Source: (.+)$", chunk, flags=re.M)
        doc = _document(chunk, shared)
        if isinstance(doc, dict) and doc:
            manifests.append(doc)
            sources.append(source.group(1) if source else "")
    return Rendered(manifests, sources)
