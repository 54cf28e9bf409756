"""Preflight logic that needs no cluster: rule table, values merging, CRD field walk, reports, exit codes.

The checks themselves run against the real control plane in tests/cluster/test_preflight.py.
"""

from __future__ import annotations

import json

import pytest

from harness.storage import claims_needed
from kvtier import exitcodes
from kvtier.cluster.kwok.config import admission_policy_switches
from kvtier.errors import UserError
from kvtier.preflight import CHECKS, exit_code, inputs
from kvtier.preflight.hyperpod_checks import unknown_fields
from kvtier.preflight.model import Result
from kvtier.preflight.report import as_json
from kvtier.preflight.rules import RULES
from kvtier.validate.inputs import loader, merge


def test_every_rule_has_a_check_reason_and_remedy() -> None:
    assert CHECKS.keys() == RULES.keys()
    for rule in RULES.values():
        assert rule.reason and rule.remedy, rule.id


def test_effective_values_are_validates_own(tmp_path) -> None:
    """One merge for the toolkit: preflight sees exactly what validate's layers see (Helm's coalescing,
    measured against the real Helm in tests/charts/test_helm_values.py)."""
    file = tmp_path / "env.yaml"
    file.write_text("engine:\n  image:\n    tag: v9\n  shmSize: null\ncurvine:\n  master:\n    replicas: 3\n")
    values = inputs.effective_values(file)
    assert values == merge.effective(loader.load(file).data)
    assert values["engine"]["image"]["tag"] == "v9" and values["engine"]["image"]["repository"]
    assert "shmSize" not in values["engine"], "a null removes the chart's default"


def test_effective_values_fill_defaults_under_the_file(tmp_path) -> None:
    file = tmp_path / "env.yaml"
    file.write_text("curvine:\n  master:\n    replicas: 5\n")
    values = inputs.effective_values(file)
    assert values["curvine"]["master"]["replicas"] == 5
    assert "worker" in values["curvine"], "Curvine chart defaults are under curvine:"


def test_values_file_that_is_not_a_mapping_is_a_user_error(tmp_path) -> None:
    file = tmp_path / "env.yaml"
    file.write_text("- just\n- a list\n")
    with pytest.raises(UserError, match="mapping"):
        inputs.effective_values(file)


SCHEMA = {
    "type": "object",
    "properties": {
        "kvCacheSpec": {"type": "object", "properties": {"enableL1Cache": {"type": "boolean"}}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "env": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
    },
}


def test_unknown_fields_finds_what_a_structural_schema_would_prune() -> None:
    spec = {
        "kvCacheSpec": {"enableL1Cache": True, "enableL3Cache": True},
        "labels": {"any": "thing"},
        "free": {"whatever": {"deep": 1}},
        "env": [{"name": "A"}, {"name": "B", "valueFrom": {}}],
        "volumeMounts": [],
    }
    assert sorted(unknown_fields(spec, SCHEMA)) == [
        "env[1].valueFrom",
        "kvCacheSpec.enableL3Cache",
        "volumeMounts",
    ]


def test_unknown_fields_is_empty_for_a_conforming_spec() -> None:
    assert unknown_fields({"kvCacheSpec": {"enableL1Cache": False}, "env": [{"name": "X"}]}, SCHEMA) == []


def test_claims_needed_counts_statefulset_templates_per_replica() -> None:
    manifests = [
        {"kind": "PersistentVolumeClaim", "spec": {"storageClassName": "r-curvine"}},
        {"kind": "StatefulSet", "spec": {"replicas": 3, "volumeClaimTemplates": [{"spec": {}}]}},
        {"kind": "ConfigMap"},
    ]
    assert claims_needed(manifests) == {"r-curvine": 1, "": 3}


@pytest.mark.parametrize(
    ("minor", "runtime", "gates"),
    [
        (37, "admissionregistration.k8s.io/v1beta1=true", ""),
        (35, "admissionregistration.k8s.io/v1beta1=true", "MutatingAdmissionPolicy=true"),
        (33, "admissionregistration.k8s.io/v1alpha1=true", "MutatingAdmissionPolicy=true"),
    ],
)
def test_admission_policy_switches_follow_kep_3962(minor: int, runtime: str, gates: str) -> None:
    assert admission_policy_switches(minor) == (runtime, gates)


def test_admission_policy_switches_refuse_minors_without_the_api() -> None:
    with pytest.raises(ValueError, match=r"1\.32"):
        admission_policy_switches(31)


def test_exit_code_is_1_only_when_a_check_fails() -> None:
    assert exit_code([Result("rbac", "pass", ""), Result("k8s-version", "warn", "")]) == exitcodes.OK
    assert exit_code([Result("rbac", "fail", ""), Result("k8s-version", "pass", "")]) == exitcodes.FINDINGS


def test_json_report_carries_remedies_for_failures_only() -> None:
    report = json.loads(
        as_json([Result("rbac", "fail", "denied"), Result("gpu-nodes", "pass", "ok")], release="r")
    )
    rows = {row["id"]: row for row in report["checks"]}
    assert rows["rbac"]["remedy"] == RULES["rbac"].remedy
    assert rows["gpu-nodes"]["remedy"] == ""
    assert report["summary"] == {"fail": 1, "pass": 1} and report["release"] == "r"


def test_cli_missing_file_is_a_usage_error(tmp_path, capsys) -> None:
    from kvtier.cli import main

    assert main(["preflight", str(tmp_path / "nope.yaml")]) == exitcodes.USAGE
    assert "no such values file" in capsys.readouterr().err


def test_cli_broken_yaml_is_a_usage_error_naming_the_line(tmp_path, capsys) -> None:
    from kvtier.cli import main

    file = tmp_path / "env.yaml"
    file.write_text("target: standalone\nmodels: [\n")
    assert main(["preflight", str(file), "--kubeconfig", str(tmp_path / "none")]) == exitcodes.USAGE
    assert f"{file}:" in capsys.readouterr().err
