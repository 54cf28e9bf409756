"""Generated suites over generated charts (unittest_gen), each run by the real pinned helm-unittest and by
the plugin through the differential harness (kvtier.unittest_compare): every case must get the same
verdict and, when it fails, the same failing assertions. The run prints how many cases it compared.

CI runs a fixed sequence of examples (derandomized) so a landing run is reproducible; set
KVTIER_UNITTEST_GEN_RANDOM=1 to explore new ones and KVTIER_UNITTEST_GEN_EXAMPLES to change how many.
A family that disagrees is kept on disk and named in the failure, to become a corpus case.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest
import unittest_gen
from hypothesis import HealthCheck, Phase, given, settings

from kvtier import paths, unittest_compare

DEFAULT_EXAMPLES = 16
EXAMPLES = int(os.environ.get("KVTIER_UNITTEST_GEN_EXAMPLES", DEFAULT_EXAMPLES))
RANDOM = os.environ.get("KVTIER_UNITTEST_GEN_RANDOM") == "1"
MINIMUM_CASES = 1000


@pytest.fixture(autouse=True)
def tools(need) -> None:
    need((paths.TOOLS_BIN / "helm-unittest").exists(), "the real helm-unittest is not built (make tools)")
    need((paths.TOOLS_BIN / "helm3").exists(), "pinned Helm 3 not built (make tools)")


def _describe(result: unittest_compare.ChartComparison) -> str:
    lines = []
    for (suite, it, n), (real, ours) in result.differences.items():
        lines.append(f"{suite} :: {it} #{n}: helm-unittest {real.show() if real else 'absent'}, "
                     f"plugin {ours.show() if ours else 'absent'}")  # fmt: skip
    return "\n".join(lines)


def test_generated_suites_get_helm_unittests_verdicts(capsys) -> None:
    totals: Counter[str] = Counter()

    @settings(
        max_examples=EXAMPLES,
        derandomize=not RANDOM,
        deadline=None,
        phases=[Phase.generate],  # each example runs both tools; shrinking would take hours
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(unittest_gen.family(tests_per_suite=22))
    def check(drawn: unittest_gen.Family) -> None:
        work = Path(tempfile.mkdtemp(prefix="kvtier-unittest-gen-"))
        chart = unittest_gen.write_family(work / "src", drawn)
        result = unittest_compare.compare(chart, work / "run")
        totals["families"] += 1
        totals["cases"] += len(result.real)
        totals["failed"] += sum(v.outcome == "failed" for v in result.real.values())
        totals["differences"] += len(result.differences)
        if result.differences:
            pytest.fail(f"generated family kept at {work / 'src'} disagrees:\n{_describe(result)}")
        shutil.rmtree(work)

    check()
    with capsys.disabled():
        print(
            f"\ngenerated differential: {totals['cases']} cases in {totals['families']} chart families "
            f"({totals['failed']} failing under helm-unittest), {totals['differences']} disagreements"
        )
    assert totals["differences"] == 0
    if EXAMPLES == DEFAULT_EXAMPLES:
        assert totals["cases"] >= MINIMUM_CASES, "the generator no longer reaches the cases CI promises"


OBJECTS = unittest_gen.CLUSTER_OBJECTS
# Disagreements the generator found, kept as named cases over one fixed family (mid and its own sub on)
FOUND = {
    "includeCrds lists the CRDs of a sub-subchart": (
        {"includeCrds": True},
        {
            "asserts": [
                {"hasDocuments": {"count": 1}, "template": "charts/mid/charts/sub/crds/crd.yaml"},
                {
                    "isKind": {"of": "CustomResourceDefinition"},
                    "template": "charts/mid/charts/sub/crds/crd.yaml",
                },
            ]
        },
    ),
    "a skipped assertion sets the case back to passed": (
        {},
        {
            "documentSelector": {"path": "kind", "value": "ConfigMap", "skipEmptyTemplates": True},
            "asserts": [
                {"notFailedTemplate": {}, "documentIndex": 1},  # fails: several ConfigMaps match
                {"hasDocuments": {"count": 0}, "template": "*.yaml", "documentIndex": 0},  # skipped
            ],
        },
    ),
    # helm-unittest counts it passed; only its JUnit report says skipped (the plugin skipped it)
    "every assertion skipped by skipEmptyTemplates passes the case": (
        {},
        {
            "documentSelector": {"path": "kind", "value": "Nothing", "skipEmptyTemplates": True},
            "asserts": [
                {"equal": {"path": "data.mode", "value": "never"}},
                {"hasDocuments": {"count": 9}},
            ],
        },
    ),
    # chart overrides reach the top chart and its direct subcharts only (ModifyChartMetadata); a
    # subchart's .txt template is raw text (the plugin failed on Helm's manifest parse of it)
    "a suite's chart.version stops at the direct subcharts": (
        {"chart": {"version": "1.2.3"}},
        {
            "asserts": [
                {"equal": {"path": "metadata.labels.chart", "value": "gen-1.2.3"},
                 "template": "configmap.yaml"},
                {"equal": {"path": 'metadata.labels["helm.sh/chart"]', "value": "mid-1.2.3"},
                 "template": "charts/mid/templates/cm.yaml"},
                {"equal": {"path": 'metadata.labels["helm.sh/chart"]', "value": "sub-0.1.0"},
                 "template": "charts/mid/charts/sub/templates/cm.yaml"},
                {"matchRegexRaw": {"pattern": "mid 1.2.3 ready"},
                 "template": "charts/mid/templates/banner.txt"},
            ]
        },
    ),
    # helm-unittest sets the version after loading, unchecked; the plugin's Helm refused the chart
    "a test's chart.version that is not semver is shown as given": (
        {"chart": {"version": "1.2.3", "appVersion": "9.9"}},
        {
            "chart": {"version": "not-semver"},
            "asserts": [
                {"equal": {"path": "metadata.labels.chart", "value": "gen-not-semver"},
                 "template": "configmap.yaml"},
                {"equal": {"path": 'metadata.labels["helm.sh/chart"]', "value": "mid-not-semver"},
                 "template": "charts/mid/templates/cm.yaml"},
                {"equal": {"path": "metadata.labels.version", "value": "9.9"},
                 "template": "charts/mid/templates/cm.yaml"},
            ],
        },
    ),
    # a null test-level apiVersions leaves Go's nil list, so the suite's are not added (the plugin added them)
    "a null test apiVersions drops the suite's": (
        {"capabilities": {"apiVersions": ["x.io/v1"]}},
        {
            "capabilities": {"apiVersions": None},
            "asserts": [{"hasDocuments": {"count": 0}, "template": "policy.yaml"}],
        },
    ),
    # kubernetesProvider was refused as unsupported; the suite's objects join the test's, the list spans
    # namespaces sorted by namespace then name, and a Namespace is cluster-scoped
    "kubernetesProvider objects answer lookup": (
        {
            "release": {"namespace": "default"},
            "kubernetesProvider": {
                "scheme": {
                    "v1/ConfigMap": {"gvr": {"version": "v1", "resource": "configmaps"}, "namespaced": True},
                    "v1/Namespace": {"gvr": {"version": "v1", "resource": "namespaces"}, "namespaced": False},
                },
                "objects": [OBJECTS[3]],
            },
        },
        {
            "kubernetesProvider": {"objects": [OBJECTS[1], OBJECTS[0]]},
            "asserts": [
                {"equal": {"path": "data.seed", "value": "from-cluster"}, "template": "lookup.yaml"},
                {"equal": {"path": "data.team", "value": "team-a"}, "template": "lookup.yaml"},
                {"equal": {"path": "data.listKind", "value": "ConfigMapList"}, "template": "lookup.yaml"},
                {"equal": {"path": "data.names", "value": "default/seed,ns1/seed,"},
                 "template": "lookup.yaml"},
                {"equal": {"path": "data.spec", "value": '{"none":null,"on":true,"ratio":0.5}'},
                 "template": "lookup.yaml"},
            ],
        },
    ),
    # Helm renders under a stand-in for RELEASE-NAME; the failure text named the stand-in
    "a failedTemplate message names helm-unittest's default release": (
        {},
        {
            "set": {"boomName": True},
            "asserts": [
                {"failedTemplate": {"errorMessage": "boom for RELEASE-NAME-gen (release-name)"},
                 "template": "fails.yaml"},
            ],
        },
    ),
    # Helm logged a warning (a tag that is no bool) before its error; the plugin read the warning as the error
    "a Helm warning before a render error": (
        {},
        {
            "set": {"tags.t1": [1], "boom": True},
            "asserts": [{"failedTemplate": {"errorMessage": "boom requested"}, "template": "fails.yaml"}],
        },
    ),
    # helm-unittest serves only the listed API versions; `helm template` added its built-in ones
    "a test that lists no apiVersions is served none": (
        {},
        {
            "asserts": [
                {"equal": {"path": "data.policy", "value": "false"}, "template": "apis.yaml"},
                {"equal": {"path": "data.apps", "value": "false"}, "template": "apis.yaml"},
                {"equal": {"path": "data.count", "value": "0"}, "template": "apis.yaml"},
            ],
        },
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(FOUND))
def test_found_disagreements_stay_fixed(name: str, tmp_path: Path) -> None:
    suite_fields, test_fields = FOUND[name]
    test = {"it": name, **test_fields}
    drawn = unittest_gen.Family(
        {"sub": False, "tagged": False, "mid": True},
        {"tests/found_test.yaml": [{"suite": "found", **suite_fields, "tests": [test]}]},
    )
    result = unittest_compare.compare(unittest_gen.write_family(tmp_path / "src", drawn), tmp_path / "run")
    assert [v.outcome for v in result.real.values()] == ["passed"], "helm-unittest's verdict changed"
    assert not result.differences, _describe(result)
