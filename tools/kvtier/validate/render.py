"""Render the umbrella chart for an environment with the pinned Helm 3 and Helm 4."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kvtier import helm, paths, toolchain
from kvtier.validate.findings import Finding
from kvtier.validate.merge import UMBRELLA

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
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


def split(text: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Documents of `helm template` output, with the template each came from."""
    manifests, sources = [], []
    for chunk in re.split(r"^---\s*$", text, flags=re.M):
        source = re.search(r"^# Source: (.+)$", chunk, flags=re.M)
        doc = yaml.load(chunk, Loader=_Loader)
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


def render(
    values_file: Path, major: int, release: str, namespace: str, kube_version: str, chart: Path | None = None
) -> Render:
    chart = chart or paths.CHARTS / UMBRELLA
    command = [
        str(toolchain.helm(major)),
        "template",
        release,
        str(chart),
        "-f",
        str(values_file),
        "--namespace",
        namespace,
        "--kube-version",
        kube_version,
    ]
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return Render(major, error=f"helm template took more than {TIMEOUT_S} s")
    if run.returncode != 0:
        return Render(major, error=clean_error(run.stderr))
    try:
        manifests, sources = split(run.stdout)
    except yaml.YAMLError as error:
        return Render(major, error=f"Helm rendered invalid YAML: {error}")
    return Render(major, manifests, sources)


def finding(r: Render, file: str) -> Finding:
    """Helm's refusal, with the template it came from as the object (`fail` messages are the chart's)."""
    match = re.match(r"execution error at \(([^)]*)\): (.*)", r.error, flags=re.S)
    subject, message = (match.group(1), match.group(2)) if match else ("", r.error)
    return Finding(f"render helm{r.major}", "render.error", message.strip(), file, subject=subject)
