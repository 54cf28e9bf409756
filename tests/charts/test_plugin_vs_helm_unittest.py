"""The pytest plugin against the real helm-unittest: same verdict, and for a failure the same failed
assertions, for every `it` of every suite (kvtier.unittest_compare, also `kvtier unittest-compare`).

Both tools run on throw-away copies of each chart (they may write snapshot files). The corpus under
tests/unittest_corpus/ also has verdicts recorded from the real helm-unittest (record.py), so the
plugin is checked against them even where helm-unittest is not built.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kvtier import paths, unittest_compare
from kvtier.unittest_reference import mirror_chart

CORPUS = paths.ROOT / "tests" / "unittest_corpus"
CHARTS = [paths.CHARTS / "curvine", paths.CHARTS / "kv-tiered-inference", CORPUS / "corpus"]
HELM_UNITTEST = paths.TOOLS_BIN / "helm-unittest"
HELM3 = paths.TOOLS_BIN / "helm3"


def helm_unittest_verdicts(chart: Path, workdir: Path) -> dict[tuple[str, str, int], str]:
    found = unittest_compare.real_verdicts(chart, unittest_compare.Collection(), workdir)
    return {key: verdict.outcome for key, verdict in found.items()}


def plugin_verdicts(chart: Path, workdir: Path, *extra: str) -> dict[tuple[str, str, int], str]:
    """The plugin in a hermetic pytest: the chart as the only path, no ini file, no inherited addopts."""
    found = unittest_compare.plugin_verdicts(chart, unittest_compare.Collection(), workdir, *extra)
    return {key: verdict.outcome for key, verdict in found.items()}


@pytest.mark.parametrize("chart", CHARTS, ids=[c.name for c in CHARTS])
def test_same_verdict_and_failed_assertions_for_every_case(chart: Path, tmp_path: Path, need) -> None:
    need(HELM_UNITTEST.exists(), f"the real helm-unittest is not built at {HELM_UNITTEST} (make tools)")
    need(HELM3.exists(), f"pinned Helm 3 missing at {HELM3} (make tools)")
    need(any(chart.glob("tests/*_test.yaml")), f"{chart} has no suites yet")
    result = unittest_compare.compare(chart, tmp_path)
    assert result.real, "helm-unittest reported no test cases"
    assert not result.differences, "cases differ (helm-unittest, plugin):\n" + "\n".join(
        f"  {suite} :: {it}: {real.show() if real else None} vs {ours.show() if ours else None}"
        for (suite, it, _), (real, ours) in result.differences.items()
    )


@pytest.mark.parametrize("mode", [(), ("--helm-unittest-no-batch",)], ids=["batched", "one-by-one"])
def test_corpus_matches_recorded_verdicts(mode: tuple[str, ...], tmp_path: Path, need) -> None:
    need(HELM3.exists(), f"pinned Helm 3 missing at {HELM3} (make tools)")
    recorded = json.loads((CORPUS / "verdicts.json").read_text())
    ours = plugin_verdicts(mirror_chart(CORPUS / "corpus", tmp_path), tmp_path, *mode)
    got = {f"{suite}::{it}": verdict for (suite, it, _), verdict in ours.items()}
    assert set(got) == set(recorded), "the corpus and its recorded verdicts list different cases"
    assert {k: got[k] for k in recorded if got[k] != recorded[k]} == {}
    assert {"passed", "failed", "skipped"} <= set(recorded.values()), "the corpus must cover every outcome"


def test_snapshots_are_interchangeable(tmp_path: Path, need) -> None:
    """The plugin writes the same snapshot file as helm-unittest, and each tool accepts the other's."""
    need(HELM_UNITTEST.exists(), f"the real helm-unittest is not built at {HELM_UNITTEST} (make tools)")
    need(HELM3.exists(), f"pinned Helm 3 missing at {HELM3} (make tools)")
    real, ours = (
        mirror_chart(CORPUS / "corpus", tmp_path / "real"),
        mirror_chart(CORPUS / "corpus", tmp_path / "plugin"),
    )
    for chart in (real, ours):
        shutil.rmtree(chart / "tests" / "__snapshot__", ignore_errors=True)
    helm_unittest_verdicts(real, tmp_path)
    plugin_verdicts(ours, tmp_path)
    snap = Path("tests/__snapshot__/snapshot_test.yaml.snap")
    assert (real / snap).read_text() == (ours / snap).read_text()
    # each tool now reads the other's file: swap them and check the snapshot tests still pass
    shutil.copy(real / snap, tmp_path / "swap.snap")
    shutil.copy(ours / snap, real / snap)
    shutil.copy(tmp_path / "swap.snap", ours / snap)
    real_verdicts = helm_unittest_verdicts(real, tmp_path)
    our_verdicts = plugin_verdicts(ours, tmp_path)
    for verdicts in (real_verdicts, our_verdicts):
        snapshot_cases = {k: v for k, v in verdicts.items() if k[0] == "snapshots"}
        assert snapshot_cases and set(snapshot_cases.values()) == {"passed"}
