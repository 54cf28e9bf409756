"""kvtier.scheduling: kube-scheduler's filters case by case (the tolerations, selector operators and request
sums as core/v1 and component-helpers define them). tests/cluster/test_scheduling_vs_kube_scheduler.py
holds the same functions to the real scheduler on generated nodes and pods."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kvtier import scheduling

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def _node(labels: dict | None = None, taints: list | None = None, **allocatable: str) -> dict:
    return {
        "metadata": {"name": "n", "labels": labels or {}},
        "spec": {"taints": taints or []},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10", **allocatable}},
    }


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, True),
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, True),  # no effect: every effect
        ({"operator": "Exists"}, True),  # no key with Exists: every taint
        ({"key": "nvidia.com/gpu", "value": "present"}, True),  # no operator: Equal
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "other"}, False),
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "dedicated", "operator": "Equal", "value": "inference", "effect": "NoSchedule"}, False),
    ],
)
def test_a_toleration_matches_a_taint_as_core_v1_says(toleration: dict, expected: bool) -> None:
    assert scheduling.tolerates(toleration, GPU_TAINT) is expected


def test_prefer_no_schedule_never_filters_and_admission_tolerates_not_ready_for_a_while() -> None:
    soft = {"key": "spot", "effect": "PreferNoSchedule"}
    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
    assert scheduling.refusal({}, _node(taints=[soft, not_ready])) is None
    refused = scheduling.refusal({}, _node(taints=[{**not_ready, "effect": "NoSchedule"}]))
    assert refused is not None and refused.plugin == "TaintToleration"


def test_a_replaced_toleration_list_loses_the_gpu_nodes() -> None:
    spec = {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "inference"}]}
    refused = scheduling.refusal(
        spec, _node(taints=[GPU_TAINT, {"key": "dedicated", "value": "inference", "effect": "NoSchedule"}])
    )
    assert refused is not None and refused.plugin == "TaintToleration"
    assert refused.detail == "taint nvidia.com/gpu=present:NoSchedule not tolerated"


@pytest.mark.parametrize(
    ("expression", "labels", "expected"),
    [
        ({"key": "zone", "operator": "In", "values": ["a", "b"]}, {"zone": "b"}, True),
        ({"key": "zone", "operator": "In", "values": ["a"]}, {}, False),
        ({"key": "zone", "operator": "NotIn", "values": ["a"]}, {}, True),  # absent is not in
        ({"key": "zone", "operator": "NotIn", "values": ["a"]}, {"zone": "a"}, False),
        ({"key": "gpu", "operator": "Exists"}, {"gpu": ""}, True),
        ({"key": "gpu", "operator": "DoesNotExist"}, {"gpu": ""}, False),
        ({"key": "mem", "operator": "Gt", "values": ["40000"]}, {"mem": "46068"}, True),
        ({"key": "mem", "operator": "Lt", "values": ["40000"]}, {"mem": "46068"}, False),
        ({"key": "mem", "operator": "Gt", "values": ["4"]}, {"mem": "4.5"}, False),  # not an integer
        ({"key": "mem", "operator": "Gt", "values": ["4"]}, {}, False),
    ],
)
def test_node_affinity_operators(expression: dict, labels: dict, expected: bool) -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expression]}]
            }
        }
    }
    assert (scheduling.affinity_refusal({"affinity": affinity}, _node(labels)) == "") is expected


def test_terms_are_ored_an_empty_term_matches_nothing_and_nodeselector_is_anded() -> None:
    def required(*terms: dict) -> dict:
        return {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
            }
        }

    node = _node({"a": "1"})
    node["metadata"]["name"] = "gpu-0"
    miss = {"matchExpressions": [{"key": "a", "operator": "In", "values": ["2"]}]}
    by_name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-0"]}]}
    assert scheduling.affinity_refusal({"affinity": required(miss, by_name)}, node) == ""
    assert scheduling.affinity_refusal({"affinity": required({})}, node) != ""
    assert scheduling.affinity_refusal({"affinity": required()}, node) != ""
    assert scheduling.affinity_refusal({"nodeSelector": {"a": "1", "b": "2"}}, node).startswith(
        "nodeSelector b=2"
    )


def test_requests_sum_containers_and_sidecars_and_take_the_largest_init_step() -> None:
    def c(cpu: str, restart: str | None = None) -> dict:
        out: dict = {"resources": {"requests": {"cpu": cpu}}}
        if restart:
            out["restartPolicy"] = restart
        return out

    spec = {
        "containers": [c("1"), c("500m")],
        "initContainers": [c("3"), c("250m", "Always"), c("2")],
        "overhead": {"cpu": "100m"},
    }
    # containers 1.5 + sidecar 0.25 = 1.75; init steps 3 and 2 + 0.25; the largest is 3; + overhead 0.1
    assert scheduling.pod_requests(spec)["cpu"] == Fraction(31, 10)
    limited = {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}
    assert scheduling.pod_requests(limited) == {"nvidia.com/gpu": 2}


def test_resources_are_held_to_allocatable_and_a_missing_resource_is_zero() -> None:
    gpu_pod = {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    refused = scheduling.refusal(gpu_pod, _node())
    assert refused is not None and refused.plugin == "NodeResourcesFit"
    assert "nvidia.com/gpu 1" in refused.detail
    assert scheduling.refusal(gpu_pod, _node(**{"nvidia.com/gpu": "1"})) is None
    big = {"containers": [{"resources": {"requests": {"memory": "9Gi"}}}]}
    assert scheduling.refusal(big, _node()) is not None


def test_a_cordoned_node_takes_only_pods_that_tolerate_it_and_daemonsets_do() -> None:
    node = _node()
    node["spec"]["unschedulable"] = True
    assert scheduling.refusal({}, node) == scheduling.Refusal(
        "NodeUnschedulable", "the node is cordoned (spec.unschedulable)"
    )
    assert scheduling.refusal({}, node, daemon=True) is None
