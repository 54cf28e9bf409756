"""The preflight's inputs: the values file with the charts' defaults under it, and what it renders to."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from kvtier import helm, paths
from kvtier.validate import loader

UMBRELLA = paths.CHARTS / "kv-tiered-inference"
CURVINE = paths.CHARTS / "curvine"


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Helm's merge of values: maps merge key by key, anything else (lists too) is replaced."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _defaults(chart: Path) -> dict[str, Any]:
    file = chart / "values.yaml"
    return (yaml.safe_load(file.read_text()) or {}) if file.is_file() else {}


def effective_values(file: Path) -> dict[str, Any]:
    """The values an install of `file` would see: umbrella defaults < Curvine defaults < the file."""
    data = loader.load(file).data or {}
    if not isinstance(data, dict):
        from kvtier.errors import UserError

        raise UserError(f"{file}:1:1: a values file must be a mapping of keys, got {type(data).__name__}")
    defaults = merge(_defaults(UMBRELLA), {"curvine": _defaults(CURVINE)})
    return merge(defaults, data)


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
