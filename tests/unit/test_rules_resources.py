"""kube-resources-admitted (kvtier.validate.checks.resource_rules): a container's resources as the API
server's validateResourceRequirements judges them. tests/cluster/test_resource_rules_vs_apiserver.py holds
the same `judge` to the real API server on generated containers."""

from __future__ import annotations

from typing import Any

import pytest

from harness.manifests import run_rule, workload
from kvtier.validate import catalogue
from kvtier.validate.checks.resource_rules import OVER_LIMIT, extended, judge, native, qualified
from kvtier.validate.findings import Finding

RULE = "kube-resources-admitted"


def _deployment(resources: dict[str, Any], init: bool = False) -> dict[str, Any]:
    container = {"name": "engine", "image": "e:v1", "resources": resources}
    field = "initContainers" if init else "containers"
    pod: dict[str, Any] = {field: [container]}
    if init:
        pod["containers"] = [{"name": "main", "image": "e:v1"}]
    return workload(pod)


def _run(*manifests: dict[str, Any]) -> list[Finding]:
    return run_rule(RULE, *manifests)


def test_the_rule_is_registered_with_its_sources() -> None:
    r = catalogue.all_rules()[RULE]
    assert r.scope == "manifests"
    assert "validateResourceRequirements" in r.reason and "IsOvercommitAllowed" in r.reason


@pytest.mark.parametrize(
    "resources",
    [
        {"limits": {"nvidia.com/gpu": 1}},
        {"limits": {"nvidia.com/gpu": "4", "vpc.amazonaws.com/efa": 1}, "requests": {"nvidia.com/gpu": 4}},
        {"limits": {"aws.amazon.com/neuron": 2}, "requests": {"aws.amazon.com/neuron": "2", "cpu": "8"}},
        {"limits": {"hugepages-2Mi": "1Gi", "memory": "2Gi"}, "requests": {"hugepages-2Mi": "1Gi"}},
        {"limits": {"hugepages-1Gi": "2Gi", "cpu": "1"}},
        {"requests": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "10Gi"}, "limits": {"cpu": "2"}},
        {
            "limits": {"example.kubernetes.io/widget": "0.5"},
            "requests": {"example.kubernetes.io/widget": "100m"},
        },
        # thousandths rounded up, as Quantity.MilliValue: 0.9999 reads as 1.000
        {"limits": {"nvidia.com/gpu": "0.9999"}},
        {},
    ],
)
def test_what_the_api_server_admits_passes(resources: dict[str, Any]) -> None:
    assert judge(resources) == []
    assert _run(_deployment(resources)) == []


@pytest.mark.parametrize(
    ("resources", "field", "words"),
    [
        ({"requests": {"vpc.amazonaws.com/efa": 1}}, "requests[vpc.amazonaws.com/efa]", "without a limit"),
        (
            {"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}},
            "requests[nvidia.com/gpu]",
            "must equal the limit 2",
        ),
        ({"limits": {"nvidia.com/gpu": "0.5"}}, "limits[nvidia.com/gpu]", "whole number"),
        ({"limits": {"vpc.amazonaws.com/efa": "1.0001"}}, "limits[vpc.amazonaws.com/efa]", "whole number"),
        ({"limits": {"gpu": 1}}, "limits[gpu]", "not a container resource"),
        ({"requests": {"pods": 1}}, "requests[pods]", "not a container resource"),
        ({"limits": {"NVIDIA.com/gpu": 1}}, "limits[NVIDIA.com/gpu]", "not a qualified name"),
        ({"limits": {"a/b/c": 1}}, "limits[a/b/c]", "not a qualified name"),
        (
            {"limits": {"requests.example.com/x": 1}},
            "limits[requests.example.com/x]",
            "extended resource name",
        ),
        ({"limits": {"hugepages-2Mi": "1Gi"}}, "", "cpu or memory"),
        ({"limits": {"hugepages-2Mi": "3Mi", "memory": "1Gi"}}, "limits[hugepages-2Mi]", "2Mi pages"),
        ({"limits": {"hugepages-big": "2Mi", "cpu": "1"}}, "limits[hugepages-big]", "page size"),
        (
            {"limits": {"hugepages-2Mi": "4Mi", "memory": "1Gi"}, "requests": {"hugepages-2Mi": "2Mi"}},
            "requests[hugepages-2Mi]",
            "must equal the limit",
        ),
        ({"requests": {"memory": "-1"}}, "requests[memory]", "negative"),
    ],
)
def test_what_the_api_server_refuses_is_an_error_at_its_field(
    resources: dict[str, Any], field: str, words: str
) -> None:
    assert any(f == field and words in why for f, why, _ in judge(resources)), judge(resources)
    for init in (False, True):
        findings = _run(_deployment(resources, init=init))
        assert findings and all(f.severity == "error" and f.rule == RULE for f in findings)
        assert any(words in f.message and "API server refuses" in f.message for f in findings)
        kind = "initContainers" if init else "containers"
        want = f"spec.template.spec.{kind}[0].resources" + (f".{field}" if field else "")
        assert any(f.path == want for f in findings), [f.path for f in findings]


@pytest.mark.parametrize(
    "resources",
    [
        {"requests": {"cpu": "4"}, "limits": {"cpu": "2"}},
        {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}},
        {"requests": {"aws.amazon.com/neuron": 4}, "limits": {"aws.amazon.com/neuron": 2}},
        {"requests": {"hugepages-2Mi": "4Mi", "cpu": "1"}, "limits": {"hugepages-2Mi": "2Mi"}},
    ],
)
def test_a_request_above_its_limit_is_left_to_requests_within_limits(resources: dict[str, Any]) -> None:
    assert [kind for _, _, kind in judge(resources)] == [OVER_LIMIT]
    assert _run(_deployment(resources)) == []
    assert catalogue.all_rules()["requests-within-limits"].scope == "values"


def test_the_hyperpod_worker_is_judged_as_the_deployment_the_operator_makes() -> None:
    endpoint = {
        "apiVersion": "inference.sagemaker.aws.amazon.com/v1",
        "kind": "InferenceEndpointConfig",
        "metadata": {"name": "m"},
        "spec": {"worker": {"resources": {"requests": {"nvidia.com/gpu": 1}}}},
    }
    [f] = _run(endpoint)
    assert f.path == "spec.worker.resources.requests[nvidia.com/gpu]" and "without a limit" in f.message


def test_names_are_classified_as_the_api_server_helpers_do() -> None:
    assert native("cpu") and native("hugepages-2Mi") and native("example.kubernetes.io/x")
    assert extended("nvidia.com/gpu") and not extended("cpu") and not extended("requests.example.com/x")
    assert qualified("nvidia.com/gpu") and not qualified("/gpu") and not qualified("x/" + "a" * 64)
    assert not extended("a" * 245 + ".com/x")  # the quota name requests.<prefix> goes past 253
