"""The curvine chart's helm-unittest suites pass with the real helm-unittest, and every template has a
suite that names it."""

from __future__ import annotations

import re
import subprocess

from kvtier import paths

CHART = paths.CHARTS / "curvine"
UNITTEST = paths.TOOLS_BIN / "helm-unittest"


def test_every_template_is_covered_by_a_suite() -> None:
    templates = {p.name for p in (CHART / "templates").iterdir() if not p.name.startswith("_")}
    named = {
        m.group(1)
        for suite in (CHART / "tests").glob("*_test.yaml")
        for m in re.finditer(r"templates/([\w.-]+)", suite.read_text())
    }
    assert sorted(templates - named) == []


def test_helm_unittest_suites_pass(need) -> None:
    need(UNITTEST.exists(), "pinned helm-unittest not built (make tools)")
    result = subprocess.run(
        [str(UNITTEST), "-f", "tests/*_test.yaml", str(CHART)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr
    summary = re.search(r"Tests:\s+(\d+) passed, (\d+) total", result.stdout)
    assert summary, result.stdout[-800:]
    assert summary.group(1) == summary.group(2) and int(summary.group(2)) >= 60
