"""The preflight's inputs: the values file with the charts' defaults under it, and what it renders to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvtier import helm, paths
from kvtier.errors import UserError
from kvtier.validate.inputs import loader, merge

UMBRELLA = paths.CHARTS / "kv-tiered-inference"


def effective_values(file: Path) -> dict[str, Any]:
    """The values an install of `file` would see, as Helm coalesces them (kvtier.validate.inputs.merge): the
    file over the umbrella's defaults, each enabled subchart's defaults under the umbrella's block."""
    data = loader.load(file).data or {}
    if not isinstance(data, dict):
        raise UserError(f"{file}:1:1: a values file must be a mapping of keys, got {type(data).__name__}")
    return merge.effective(data)


def render(
    file: Path, release: str, namespace: str, kube_version: str, api_versions: list[str]
) -> list[dict]:
    """`helm template` of the umbrella with the cluster's version and APIs; raises UserError (Helm's
    refusal is a helm.TemplateError) on failure."""
    if not (UMBRELLA / "Chart.yaml").is_file():
        raise UserError(f"chart {UMBRELLA} not found")
    helm.build_dependencies(UMBRELLA)
    rendered = helm.Template(
        UMBRELLA,
        release,
        [file],
        namespace=namespace,
        kube_version=kube_version,
        api_versions=api_versions,
    ).render(timeout=300)
    return [doc for doc in rendered.manifests if doc.get("kind")]
