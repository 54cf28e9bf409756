"""What the preflight cluster tests share: the environments they run on and a helper that runs
`kvtier preflight` and picks one rule's result (their fixtures are in conftest.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kvtier import paths, preflight
from kvtier.cluster.common.rest import Rest
from kvtier.preflight.model import Result

ENVS = {p: yaml.safe_load(p.read_text()) for p in sorted(paths.VALUES.glob("*.yaml"))}
HYPERPOD = next((p for p, v in ENVS.items() if v.get("target") == "hyperpod"), None)
# The GPU-shaped standalone environment with Curvine (values/cpu.yaml has neither GPUs nor Curvine).
STANDALONE = next(
    (
        p
        for p, v in ENVS.items()
        if v.get("target", "standalone") == "standalone" and (v.get("curvine") or {}).get("enabled", True)
    ),
    None,
)
RELEASE = "pf"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def result_of(results: list[Result], rule: str) -> Result:
    return next(r for r in results if r.rule == rule)


def variant(tmp_path: Path, base: Path, name: str, **overrides: Any) -> Path:
    """A copy of an environment with top-level keys replaced (lists are replaced whole, as in Helm)."""
    data = yaml.safe_load(base.read_text())
    for key, value in overrides.items():
        node = data
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    out = tmp_path / f"{name}.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


def run_rule(env: Path, ns: str, rest: Rest, rule: str) -> Result:
    return result_of(preflight.run(env, RELEASE, ns, rest), rule)
