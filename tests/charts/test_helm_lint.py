"""Both charts pass `helm lint --strict` with the pinned Helm 3 and Helm 4, defaults and CI scenarios."""

from __future__ import annotations

import pytest

from kvtier import helm, paths

CHARTS = sorted(p for p in paths.CHARTS.iterdir() if (p / "Chart.yaml").exists())


def scenarios() -> list[tuple[str, str | None]]:
    cases: list[tuple[str, str | None]] = []
    for chart in CHARTS:
        cases.append((chart.name, None))
        cases.extend(
            (chart.name, str(f.relative_to(chart))) for f in sorted((chart / "ci").glob("*-values.yaml"))
        )
    return cases


@pytest.mark.parametrize("major", [3, 4])
@pytest.mark.parametrize(("chart", "values"), scenarios())
def test_helm_lint_strict(chart: str, values: str | None, major: int, need) -> None:
    need((paths.TOOLS_BIN / f"helm{major}").exists(), f"pinned Helm {major} not built (make tools)")
    chart_dir = paths.CHARTS / chart
    helm.build_dependencies(chart_dir)
    args = ["lint", "--strict", str(chart_dir)]
    if values:
        args += ["-f", str(chart_dir / values)]
    result = helm.run(args, major=major)
    assert result.returncode == 0, result.stdout + result.stderr


def test_both_charts_exist() -> None:
    assert {c.name for c in CHARTS} >= {"curvine", "kv-tiered-inference"}
