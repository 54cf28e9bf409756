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

from kvtier import helm, paths
from kvtier.validate import catalogue
from kvtier.validate.checks import chart_rules
from kvtier.validate.findings import Finding
from kvtier.validate.inputs.merge import UMBRELLA

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
        return f"helm dependency build failed: {helm.clean_error(error.stderr or '')}"
    except (OSError, yaml.YAMLError) as error:
        return f"cannot prepare the chart's dependencies: {error}"
    return ""


def template(
    values_file: Path,
    major: int,
    release: str,
    namespace: str,
    kube_version: str,
    chart: Path | None = None,
    overlay: Sequence[str] = (),
) -> helm.Template:
    """The `helm template` of one render (its command() is what benchmarks/validate_bench.py times);
    `overlay`: more -f and --set arguments after the environment's file (Options.overlay)."""
    return helm.Template(
        chart or paths.CHARTS / UMBRELLA,
        release,
        [values_file],
        overlay=overlay,
        namespace=namespace,
        kube_version=kube_version,
        major=major,
        allow_override=True,
    )


def render(one: helm.Template) -> Render:
    """One render; Helm's refusal is the Render's error. Its documents are shared between renders: read
    them, never change them."""
    try:
        rendered = one.render(shared=True, timeout=TIMEOUT_S)
    except helm.TemplateError as error:
        return Render(one.major, error=str(error))
    return Render(one.major, rendered.manifests, rendered.sources)


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
            pool.submit(render, template(path, major, release, namespace, kube_version, overlay=overlay))
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
