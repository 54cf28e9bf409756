"""`helm lint --strict` of the umbrella with every values/ environment, pinned Helm 3 and Helm 4
(the chart defaults and ci/ scenarios are linted by test_helm_lint.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from render import helm_bin

from kvtier import helm, paths

CHART = paths.CHARTS / "kv-tiered-inference"
ENVS = sorted(paths.VALUES.glob("*.yaml"))


@pytest.mark.parametrize("major", [3, 4])
@pytest.mark.parametrize("values", ENVS, ids=lambda p: p.name)
def test_environment_lints_strict(values: Path, major: int, need) -> None:
    need(helm_bin(major).exists(), f"pinned Helm {major} not built (make tools)")
    helm.build_dependencies(CHART)
    args = ["lint", "--strict", str(CHART), "-f", str(values)]
    result = helm.run(args, major=major)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[ERROR]" not in result.stdout and "[WARNING]" not in result.stdout, result.stdout
