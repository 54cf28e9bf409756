"""Render a chart with the pinned Helm (3 or 4) and return its documents (shared by the chart tests).

from render import render_docs, find
docs = render_docs("curvine", values=[path], set_values={"master.replicas": 1})
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from kvtier import helm, helmyaml, paths

RELEASE = "rel"
NAMESPACE = "kv"


def helm_bin(major: int = 3) -> Path:
    """Where the pinned Helm lives (tests check it with need() before rendering)."""
    return paths.TOOLS_BIN / f"helm{major}"


def render(
    chart: str | Path,
    *,
    values: Iterable[Path] = (),
    set_values: Mapping[str, Any] | None = None,
    major: int = 3,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
    extra: Iterable[str] = (),
) -> subprocess.CompletedProcess[str]:
    """`helm template` of a chart (a name under charts/ or a path); the completed process, never raising."""
    chart_dir = Path(chart) if Path(chart).is_dir() else paths.CHARTS / str(chart)
    args = ["template", release, str(chart_dir), "--namespace", namespace]
    for file in values:
        args += ["--values", str(file)]
    for key, value in (set_values or {}).items():
        args += ["--set-string" if isinstance(value, str) else "--set", f"{key}={value}"]
    return helm.run([*args, *extra], major=major, timeout=120)


def render_one_key(
    key: tuple[str, ...], value: Any, base: Path, folder: Path
) -> subprocess.CompletedProcess[str]:
    """The umbrella over `base` with one key (a path of mapping keys) set to `value` in a second -f file,
    as a user's override file would set it (written as Helm's YAML reads it)."""
    override: dict[str, Any] = {}
    node = override
    for name in key[:-1]:
        node = node.setdefault(name, {})
    node[key[-1]] = value
    file = folder / f"{base.stem}-{'.'.join(key)}.yaml"
    file.write_text(helmyaml.dump(override))
    return render("kv-tiered-inference", values=[base, file], release="x", namespace="default")


def render_docs(chart: str | Path, **kwargs: Any) -> list[dict[str, Any]]:
    """The rendered documents (empty ones dropped); an AssertionError with Helm's stderr if it failed."""
    result = render(chart, **kwargs)
    assert result.returncode == 0, f"helm template failed:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    """Documents of one kind (and name)."""
    return [d for d in docs if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)]
