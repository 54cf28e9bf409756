"""The preflight's inputs: the values file with the charts' defaults under it, and what it renders to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kvtier import helm, paths
from kvtier.validate import loader, merge

UMBRELLA = paths.CHARTS / "kv-tiered-inference"


def effective_values(file: Path) -> dict[str, Any]:
    """The values an install of `file` would see, as Helm coalesces them (kvtier.validate.merge): the
    file over the umbrella's defaults, each enabled subchart's defaults under the umbrella's block."""
    data = loader.load(file).data or {}
    if not isinstance(data, dict):
        from kvtier.errors import UserError

        raise UserError(f"{file}:1:1: a values file must be a mapping of keys, got {type(data).__name__}")
    return merge.effective(data)


def render(
    file: Path, release: str, namespace: str, kube_version: str, api_versions: list[str]
) -> list[dict]:
    """`helm template` of the umbrella with the cluster's version and APIs; raises RuntimeError on failure."""
    if not (UMBRELLA / "Chart.yaml").is_file():
        raise RuntimeError(f"chart {UMBRELLA} not found")
    helm.build_dependencies(UMBRELLA)
    args = [
        "template",
        release,
        str(UMBRELLA),
        "-n",
        namespace,
        "-f",
        str(file),
        "--kube-version",
        kube_version,
    ]
    for api_version in api_versions:
        args += ["--api-versions", api_version]
    result = helm.run(args)
    if result.returncode != 0:
        raise RuntimeError(result.stderr.strip() or result.stdout.strip())
    return [doc for doc in yaml.safe_load_all(result.stdout) if isinstance(doc, dict) and doc.get("kind")]
