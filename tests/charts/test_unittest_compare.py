"""`kvtier unittest-compare`: the differential harness as a command, on charts where the two tools agree
(the lookup chart's `kubernetesProvider` fake objects included) and on one where they do not (a suite
with a `postRenderer`, which the pinned helm-unittest runs and the plugin refuses)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvtier import paths
from kvtier.cli import main

LOOKUP_CHART = paths.ROOT / "tests" / "fixtures" / "unittest_compare" / "lookup-chart"
POSTRENDER_CHART = paths.ROOT / "tests" / "fixtures" / "unittest_compare" / "postrender-chart"
CORPUS = paths.ROOT / "tests" / "unittest_corpus" / "corpus"


@pytest.fixture(autouse=True)
def tools(need) -> None:
    need((paths.TOOLS_BIN / "helm-unittest").exists(), "the real helm-unittest is not built (make tools)")
    need((paths.TOOLS_BIN / "helm3").exists(), "pinned Helm 3 not built (make tools)")


def test_agreeing_charts_exit_0_with_every_case_compared(tmp_path: Path, capsys) -> None:
    report = tmp_path / "cases.json"
    charts = [str(CORPUS), str(paths.CHARTS / "curvine")]
    assert main(["unittest-compare", *charts, "--json-file", str(report), "-o", "json"]) == 0
    captured = capsys.readouterr()
    assert "0 difference(s)" in captured.err  # with -o json stdout carries the cases only
    cases = json.loads(report.read_text())
    assert json.loads(captured.out) == cases
    assert len(cases) > 200 and all(c["helm_unittest"] == c["plugin"] for c in cases)
    # Failures are compared by the assertions that failed, not only by the verdict.
    assert any("asserts[" in c["helm_unittest"] for c in cases if c["helm_unittest"].startswith("failed"))


def test_a_disagreement_is_named_and_exits_1(capsys) -> None:
    assert main(["unittest-compare", str(POSTRENDER_CHART)]) == 1
    out = capsys.readouterr().out
    assert "postrender :: passes the manifests through a post-renderer" in out
    assert "helm-unittest: passed" in out and "plugin:        failed" in out
    assert "1 difference(s)" in out


def test_kubernetes_provider_lookups_agree(capsys) -> None:
    assert main(["unittest-compare", str(LOOKUP_CHART)]) == 0
    assert "0 difference(s)" in capsys.readouterr().out


def test_a_directory_without_a_chart_is_a_clear_error(tmp_path: Path, capsys) -> None:
    assert main(["unittest-compare", str(tmp_path)]) == 2
    assert "is not a chart (no Chart.yaml)" in capsys.readouterr().err
