"""Both charts' helm-unittest suites (charts/<chart>/tests/*_test.yaml) pass, every case of them, under
the real pinned helm-unittest and under the pytest plugin (pytest-helm-unittest); and every template of
each chart is named by a suite.

The umbrella depends on ../curvine: `helm dependency build` first (kvtier.helm.build_dependencies), as
for any render. Both tools run on a scratch mirror of the checkout (kvtier.unittest_reference), so a
snapshot file either might write never lands in the checkout.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from kvtier import helm, paths
from kvtier.unittest_reference import isolated_pytest, mirror_chart

UNITTEST = paths.TOOLS_BIN / "helm-unittest"
HELM3 = paths.TOOLS_BIN / "helm3"
# Fewer cases than this means suites went missing (a glob or a parse error), not that all passed.
CHARTS = {"curvine": 60, "kv-tiered-inference": 100}
_SUMMARY = re.compile(
    r"^Tests:\s+(?:(\d+) failed, )?(?:(\d+) errored, )?(\d+) passed, (?:(\d+) skipped, )?(\d+) total", re.M
)


@pytest.fixture
def chart(request: pytest.FixtureRequest, tmp_path: Path, need) -> Path:
    """A mirror of the chart, its file:// dependencies built first."""
    need(HELM3.exists(), f"pinned Helm 3 missing at {HELM3} (make tools)")
    source = paths.CHARTS / request.param
    helm.build_dependencies(source)
    return mirror_chart(source, tmp_path / "mirror")


@pytest.mark.parametrize("name", sorted(CHARTS))
def test_every_template_is_named_by_a_suite(name: str) -> None:
    chart = paths.CHARTS / name
    templates = {
        p.relative_to(chart / "templates").as_posix()
        for p in (chart / "templates").rglob("*")
        if p.is_file() and not p.name.startswith("_")
    }
    suites = "\n".join(suite.read_text() for suite in (chart / "tests").glob("*_test.yaml"))
    assert sorted(t for t in templates if f"templates/{t}" not in suites) == []


@pytest.mark.parametrize("chart", sorted(CHARTS), indirect=True)
def test_every_case_passes_under_the_real_helm_unittest(chart: Path, need) -> None:
    need(UNITTEST.exists(), f"the real helm-unittest is not built at {UNITTEST} (make tools)")
    result = subprocess.run(
        [str(UNITTEST), "-f", "tests/*_test.yaml", "--color=false", str(chart)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    summary = _SUMMARY.search(result.stdout)
    assert summary, f"no `Tests:` summary line in helm-unittest's output:\n{result.stdout[-800:]}"
    failed, errored, passed, skipped, total = (int(g or 0) for g in summary.groups())
    assert (failed, errored, skipped) == (0, 0, 0), summary.group(0)
    assert passed == total >= CHARTS[chart.name], summary.group(0)


@pytest.mark.parametrize("chart", sorted(CHARTS), indirect=True)
def test_every_case_passes_under_the_plugin(chart: Path, tmp_path: Path) -> None:
    report = tmp_path / "plugin.json"
    cmd, env = isolated_pytest(chart)
    cmd += ["-q", "--helm-unittest-root", str(chart), "--helm-unittest-report", str(report), str(chart)]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=chart, env=env, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    cases = json.loads(report.read_text())
    not_passed = [f"{c['suite']} :: {c['it']}: {c['outcome']}" for c in cases if c["outcome"] != "passed"]
    assert not_passed == []
    assert len(cases) >= CHARTS[chart.name]
