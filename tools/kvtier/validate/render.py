"""Render the umbrella chart for an environment with the pinned Helm 3 and Helm 4."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kvtier import helm, helmyaml, paths, toolchain
from kvtier.validate import catalogue, chart_rules
from kvtier.validate.findings import Finding
from kvtier.validate.merge import UMBRELLA

_Loader = helmyaml.Loader  # the API server and Helm read YAML alike (sigs.k8s.io/yaml)
TIMEOUT_S = 120


@dataclass
class Render:
    major: int
    manifests: list[dict[str, Any]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # template file of each manifest
    error: str = ""  # Helm's message when rendering failed


def ensure_dependencies(chart: Path | None = None) -> str:
    """Package file:// subcharts (once, before parallel renders); '' when fine, else Helm's message."""
    try:
        helm.build_dependencies(chart or paths.CHARTS / UMBRELLA)
    except subprocess.CalledProcessError as error:
        return f"helm dependency build failed: {clean_error(error.stderr or '')}"
    except (OSError, yaml.YAMLError) as error:
        return f"cannot prepare the chart's dependencies: {error}"
    return ""


# Document text -> parsed document. Helm 3 and 4, and environments, render many identical documents
# (less than half of them are unique over values/): each is parsed once. Shared, so never mutated.
_parsed: dict[str, Any] = {}
_PARSED_MAX = 4096


def _document(chunk: str) -> Any:
    doc = _parsed.get(chunk)
    if doc is None:
        if len(_parsed) >= _PARSED_MAX:  # a long-lived process (the test suite) renders without end
            _parsed.clear()
        doc = _parsed[chunk] = yaml.load(chunk, Loader=_Loader)
    return doc


def split(text: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Documents of `helm template` output, with the template each came from. The documents are
    shared between renders: read them, never change them."""
    manifests, sources = [], []
    for chunk in re.split(r"^---\s*$", text, flags=re.M):
        source = re.search(r"^# Source: (.+)$", chunk, flags=re.M)
        doc = _document(chunk)
        if isinstance(doc, dict) and doc:
            manifests.append(doc)
            sources.append(source.group(1) if source else "")
    return manifests, sources


def clean_error(stderr: str) -> str:
    """Helm's error without the noise: the `fail` message and the template it came from."""
    lines = [line for line in stderr.strip().splitlines() if line.strip() and not line.startswith("WARNING")]
    text = " ".join(lines) or "helm failed without a message"
    text = re.sub(r"^Error: ", "", text)
    text = re.sub(r"\s*Use --debug flag to render out invalid YAML\s*$", "", text)
    return text[:800]


def command(
    values_file: Path,
    major: int,
    release: str,
    namespace: str,
    kube_version: str,
    chart: Path | None = None,
    overlay: Sequence[str] = (),
) -> list[str]:
    """The `helm template` command line of one render (also what benchmarks/validate_bench.py times);
    `overlay`: more -f and --set arguments after the environment's file (Options.overlay)."""
    chart = chart or paths.CHARTS / UMBRELLA
    return [
        str(toolchain.helm(major)),
        "template",
        release,
        str(chart),
        "-f",
        str(values_file),
        *overlay,
        "--namespace",
        namespace,
        "--kube-version",
        kube_version,
    ]


def render(
    values_file: Path,
    major: int,
    release: str,
    namespace: str,
    kube_version: str,
    chart: Path | None = None,
    overlay: Sequence[str] = (),
) -> Render:
    try:
        run = subprocess.run(
            command(values_file, major, release, namespace, kube_version, chart, overlay),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return Render(major, error=f"helm template took more than {TIMEOUT_S} s")
    if run.returncode != 0:
        return Render(major, error=clean_error(run.stderr))
    try:
        manifests, sources = split(run.stdout)
    except yaml.YAMLError as error:
        return Render(major, error=f"Helm rendered invalid YAML: {error}")
    return Render(major, manifests, sources)


@dataclass
class Started:
    """Every file's renders, running in the background: pending[i] holds file i's, one per major."""

    problem: str  # why nothing is rendered (the chart's dependencies cannot be prepared); '' if none
    pending: list[list[Future[Render]]]


def start(
    files: Sequence[Path],
    majors: Sequence[int],
    release: str,
    namespace: str,
    kube_version: str,
    jobs: int,
    overlay: Sequence[str] = (),
) -> Started:
    """Start rendering every file with every major, `jobs` Helm processes at a time, and return at once:
    Helm runs while the caller imports and runs the in-process checks."""
    problem = ensure_dependencies()
    if problem:
        return Started(problem, [[] for _ in files])
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="helm")
    pending = [
        [
            pool.submit(render, path, major, release, namespace, kube_version, None, overlay)
            for major in majors
        ]
        for path in files
    ]
    pool.shutdown(wait=False)  # the queue still runs to the end; the workers exit after it
    return Started("", pending)


def finding(r: Render, file: str) -> Finding:
    """Helm's refusal, with the template it came from as the object. A chart `fail` names its rule and
    values key (`[rule-id] key.path: ...`, chart_rules.py): the finding carries both, and the catalogue
    entry's reason and remedy; any other error is `render.error`."""
    match = re.match(r"execution error at \(([^)]*)\): (.*)", r.error, flags=re.S)
    subject, message = (match.group(1), match.group(2)) if match else ("", r.error)
    refusal = chart_rules.read_refusal(message, subject.split(":")[0])
    known = catalogue.all_rules().get(refusal.rule)
    if known is None:
        return Finding(f"render helm{r.major}", "render.error", refusal.message, file, subject=subject)
    return Finding(
        f"render helm{r.major}",
        known.id,
        refusal.message,
        file,
        path=refusal.key,
        subject=subject,
        suggestion=known.remedy,
        reason=known.reason,
    )
