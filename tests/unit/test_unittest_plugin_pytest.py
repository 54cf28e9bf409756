"""The plugin as pytest users see it: opt-in collection, item names, selection, skips, failure text.

Runs pytest in a subprocess on a copy of the conformance corpus chart. Collection needs no tools;
running cases needs the pinned Helm 3.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kvtier import paths
from kvtier.unittest_reference import isolated_pytest

CORPUS = paths.ROOT / "tests" / "unittest_corpus" / "corpus"
HELM3 = paths.TOOLS_BIN / "helm3"


@pytest.fixture
def chart(tmp_path: Path) -> Path:
    return Path(shutil.copytree(CORPUS, tmp_path / "corpus"))


def pytest_in(chart: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd, env = isolated_pytest(chart)
    return subprocess.run(
        [*cmd, *args], cwd=chart, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def test_inactive_without_roots(chart: Path) -> None:
    proc = pytest_in(chart, "--collect-only", "-q", str(chart))
    assert "no tests collected" in proc.stdout, proc.stdout


def test_one_item_per_it_named_chart_suite_it(chart: Path) -> None:
    proc = pytest_in(chart, "--collect-only", "-q", "--helm-unittest-root", str(chart), str(chart))
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    assert "tests/values_test.yaml::corpus::values and paths::float 1.0 equals int 1" in ids
    recorded = json.loads((CORPUS.parent / "verdicts.json").read_text())
    assert len(ids) == len(recorded), proc.stdout[-2000:]


def test_bad_suite_is_a_collection_error_naming_the_file(chart: Path) -> None:
    (chart / "tests" / "broken_test.yaml").write_text("suite: broken\ntests:\n  - it: has no asserts\n")
    proc = pytest_in(chart, "--collect-only", "-q", "--helm-unittest-root", str(chart), str(chart))
    assert proc.returncode != 0
    assert "broken_test.yaml" in proc.stdout and "no asserts found" in proc.stdout


def test_selection_skip_and_failure_text(chart: Path, need) -> None:
    need(HELM3.exists(), f"pinned Helm 3 missing at {HELM3} (make tools)")
    proc = pytest_in(
        chart,
        "-q",
        "-rs",
        "--helm-unittest-root",
        str(chart),
        "-k",
        "(paths and notEqual) or never",
        str(chart),
    )
    assert "1 passed" in proc.stdout and "1 failed" in proc.stdout and "1 skipped" in proc.stdout, proc.stdout
    assert "corpus checks suite-level skip" in proc.stdout  # the suite's skip reason
    failure = proc.stdout[proc.stdout.index("notEqual fails when equal") :]
    where = ("Template:\tcorpus/templates/deployment.yaml", "DocumentIndex:\t0", "Path:\tspec.replicas")
    for expected in (*where, "Expected NOT to equal:", "\t2"):
        assert expected in failure, failure[:1500]


def test_equal_failure_shows_a_diff_and_types(chart: Path, need) -> None:
    need(HELM3.exists(), f"pinned Helm 3 missing at {HELM3} (make tools)")
    proc = pytest_in(chart, "-q", "--helm-unittest-root", str(chart), "-k", "timestamps", str(chart))
    assert "1 failed" in proc.stdout, proc.stdout
    for expected in ("Expected to equal:", "Actual:", "Diff:", "--- Expected", "+++ Actual", '-"2024-01-01"'):
        assert expected in proc.stdout, proc.stdout[-2500:]
    proc = pytest_in(chart, "-q", "--helm-unittest-root", str(chart), "-k", "replicas and fails", str(chart))
    assert "Types:\texpected float64, actual int" in proc.stdout, proc.stdout[-2500:]


def test_marker_and_update_snapshots(chart: Path, need) -> None:
    need(HELM3.exists(), f"pinned Helm 3 missing at {HELM3} (make tools)")
    snap = chart / "tests" / "__snapshot__" / "snapshot_test.yaml.snap"
    snap.write_text(snap.read_text().replace("RELEASE-NAME-corpus-config", "stale-name"))
    selected = ("-m", "helm_unittest", "-k", "snapshots")
    stale = pytest_in(chart, "-q", "--helm-unittest-root", str(chart), *selected, str(chart))
    assert "1 failed" in stale.stdout and "stale-name" in stale.stdout, stale.stdout[-2500:]
    pytest_in(chart, "-q", "--helm-unittest-root", str(chart), "--update-snapshots", *selected, str(chart))
    assert "stale-name" not in snap.read_text()
    fresh = pytest_in(chart, "-q", "--helm-unittest-root", str(chart), *selected, str(chart))
    assert "4 passed" in fresh.stdout, fresh.stdout[-2500:]


def test_only_the_listed_api_versions_are_served(chart: Path, need) -> None:
    """helm-unittest serves only a test's capabilities.apiVersions; `helm template` would add its built-in
    ones (policy/v1 among them), so the plugin rewrites the copy's `.Capabilities.APIVersions`."""
    need(HELM3.exists(), f"pinned Helm 3 missing at {HELM3} (make tools)")
    (chart / "templates" / "pdb.yaml").write_text(
        '{{- if .Capabilities.APIVersions.Has "policy/v1" }}\n'
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: pdb}\n{{- end }}\n"
    )
    (chart / "tests" / "pdb_test.yaml").write_text(
        "suite: pdb\ntemplates: [pdb.yaml]\ntests:\n"
        "  - it: unlisted\n    asserts: [{hasDocuments: {count: 0}}]\n"
        "  - it: listed\n    capabilities: {apiVersions: [policy/v1]}\n"
        "    asserts: [{hasDocuments: {count: 1}}]\n"
    )
    proc = pytest_in(chart, "-q", "--helm-unittest-root", str(chart), "-k", "pdb", str(chart))
    assert "2 passed" in proc.stdout, proc.stdout[-2000:]
    assert "warning" not in proc.stdout.lower(), proc.stdout[-2000:]


def test_a_failure_before_a_skipped_assertion_passes_with_a_warning(chart: Path, need) -> None:
    """helm-unittest's verdict (passed) is kept; the warning names the failure it does not count."""
    need(HELM3.exists(), f"pinned Helm 3 missing at {HELM3} (make tools)")
    proc = pytest_in(
        chart, "-q", "--helm-unittest-root", str(chart), "-k", "after and failing and passes", str(chart)
    )
    assert "1 passed" in proc.stdout, proc.stdout[-2000:]
    assert "asserts[0] failed but helm-unittest passes the case: a later assertion is skipped" in proc.stdout


def test_a_case_whose_assertions_are_all_skipped_passes_with_a_warning(chart: Path, need) -> None:
    """helm-unittest counts it passed (only its JUnit report says skipped); the warning says so."""
    need(HELM3.exists(), f"pinned Helm 3 missing at {HELM3} (make tools)")
    proc = pytest_in(
        chart, "-q", "--helm-unittest-root", str(chart), "-k", "skipping and every and not render", str(chart)
    )
    summary = proc.stdout.strip().splitlines()[-1]
    assert "1 passed" in summary and "skipped" not in summary, proc.stdout[-2000:]
    assert "every assertion was skipped (documentSelector.skipEmptyTemplates" in proc.stdout
