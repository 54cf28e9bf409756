"""The curvine chart's render scenarios: defaults, ci/*-values.yaml, and the `curvine:` block of each
environment in values/ (the umbrella passes that block, with `global`, to this chart)."""

from __future__ import annotations

from pathlib import Path

import yaml

from kvtier import paths

CHART = paths.CHARTS / "curvine"


def _environments() -> dict[str, dict]:
    envs = {}
    for env in sorted(paths.VALUES.glob("*.yaml")):
        data = yaml.safe_load(env.read_text()) or {}
        block = dict(data.get("curvine") or {})
        if block.get("enabled", True) is False:
            continue
        if "global" in data:
            block["global"] = data["global"]
        envs[f"values/{env.name}"] = block
    return envs


def names() -> list[str]:
    """Every scenario: defaults, each ci file, each environment that enables Curvine."""
    ci = [f"ci/{f.name}" for f in sorted((CHART / "ci").glob("*-values.yaml"))]
    return ["defaults", *ci, *_environments()]


def values_files(name: str, tmp_dir: Path) -> list[Path]:
    """The --values files of one scenario (an environment's block is written under tmp_dir)."""
    if name == "defaults":
        return []
    if name.startswith("ci/"):
        return [CHART / name]
    out = tmp_dir / Path(name).name
    out.write_text(yaml.safe_dump(_environments()[name]))
    return [out]
