"""Effective values: what Helm computes from the charts' values.yaml files and an environment file."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from kvtier import paths

UMBRELLA = "kv-tiered-inference"


def coalesce(base: Any, override: Any) -> Any:
    """Helm's merge: mappings merge key by key, anything else (lists too) is replaced, null deletes.
    The result shares unchanged sub-trees with its inputs (no copies): treat it as read-only."""
    if not isinstance(base, dict) or not isinstance(override, dict):
        return override
    out = dict(base)
    for key, value in override.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = coalesce(out[key], value)
        else:
            out[key] = value
    return out


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return data if isinstance(data, dict) else {}


@cache
def chart_defaults(charts: Path = paths.CHARTS) -> dict[str, Any]:
    """The umbrella's values.yaml with each file:// subchart's values.yaml under its name."""
    umbrella = charts / UMBRELLA
    defaults = _read(umbrella / "values.yaml")
    chart = _read(umbrella / "Chart.yaml")
    for dep in chart.get("dependencies") or []:
        repo = str(dep.get("repository", ""))
        if repo.startswith("file://"):
            name = str(dep.get("alias") or dep.get("name"))
            sub = _read((umbrella / repo.removeprefix("file://")).resolve() / "values.yaml")
            defaults[name] = coalesce(sub, defaults.get(name) or {})
    return defaults


def effective(values: dict[str, Any], charts: Path = paths.CHARTS) -> dict[str, Any]:
    return coalesce(chart_defaults(charts), values)
