"""What `validate --context` holds against the nodes (kvtier.validate.checks.placement): each workload's pods,
a HyperPod endpoint as the pods its operator makes, and which verdict is an error, which a warning."""

from __future__ import annotations

from kvtier.validate.checks import placement

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def _node(name: str, instance_type: str, taints: list | None = None) -> dict:
    return {
        "metadata": {"name": name, "labels": {"node.kubernetes.io/instance-type": instance_type}},
        "spec": {"taints": taints or []},
        "status": {"allocatable": {"cpu": "16", "memory": "120Gi", "nvidia.com/gpu": "1", "pods": "110"}},
    }


def _endpoint(tolerations: list) -> dict:
    return {
        "kind": "InferenceEndpointConfig",
        "metadata": {"name": "qwen"},
        "spec": {
            "instanceType": "ml.g6e.4xlarge",
            "worker": {"resources": {"limits": {"nvidia.com/gpu": "1"}}},
            "tolerations": tolerations,
        },
    }


GPU_NODES = [_node(f"gpu-{i}", "ml.g6e.4xlarge", [GPU_TAINT]) for i in range(2)]
NODES = [*GPU_NODES, _node("cpu-0", "m7i.2xlarge")]


def test_a_hyperpod_endpoint_whose_tolerations_lost_the_gpu_one_is_an_error_at_its_tolerations() -> None:
    dedicated = {"key": "dedicated", "operator": "Equal", "value": "inference", "effect": "NoSchedule"}
    found, judged = placement.check(NODES, [_endpoint([dedicated])], "hp.yaml")
    assert judged == 1
    [finding] = found
    assert finding.severity == "error" and finding.path == "spec.tolerations", finding
    assert finding.subject == "InferenceEndpointConfig/qwen"
    assert (
        "2 node(s) (gpu-0, gpu-1): taint nvidia.com/gpu=present:NoSchedule not tolerated" in finding.message
    )
    assert "1 node(s) (cpu-0): nodeSelector" in finding.message  # the other nodes' reason too
    assert "repeat the ones it had" in finding.suggestion

    gpu = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert placement.check(NODES, [_endpoint([gpu, dedicated])], "hp.yaml") == ([], 1)


def test_no_node_with_the_labels_is_a_warning_and_too_large_requests_an_error() -> None:
    deployment = {
        "kind": "Deployment",
        "metadata": {"name": "engine"},
        "spec": {
            "template": {
                "spec": {
                    "nodeSelector": {"node.kubernetes.io/instance-type": "ml.p5.48xlarge"},
                    "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
                }
            }
        },
    }
    [finding] = placement.check(NODES, [deployment], "v.yaml")[0]
    assert finding.severity == "warning" and finding.path == "spec.template.spec.nodeSelector", finding

    spec = deployment["spec"]["template"]["spec"]
    spec["nodeSelector"] = {"node.kubernetes.io/instance-type": "m7i.2xlarge"}
    [finding] = placement.check(NODES, [deployment], "v.yaml")[0]
    assert finding.severity == "error", finding
    assert finding.path == "spec.template.spec.containers[0].resources", finding
    assert "requests nvidia.com/gpu 8, allocatable 1" in finding.message


def test_pods_bound_by_name_are_not_judged_and_daemonsets_tolerate_cordons() -> None:
    bound = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"nodeName": "gpu-0", "containers": []}}
    cordoned = _node("cpu-0", "m7i.2xlarge")
    cordoned["spec"]["unschedulable"] = True
    daemon = {
        "kind": "DaemonSet",
        "metadata": {"name": "d"},
        "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}},
    }
    deployment = {**daemon, "kind": "Deployment"}
    assert placement.check([cordoned], [bound, daemon], "v.yaml") == ([], 1)
    [finding] = placement.check([cordoned], [deployment], "v.yaml")[0]
    assert "cordoned" in finding.message and "kubectl uncordon" in finding.suggestion


def test_a_cordoned_node_the_pods_do_not_select_leaves_a_warning_not_an_error() -> None:
    cordoned = _node("gpu-0", "ml.g6e.4xlarge")
    cordoned["spec"]["unschedulable"] = True
    deployment = {
        "kind": "Deployment",
        "metadata": {"name": "router"},
        "spec": {"template": {"spec": {"nodeSelector": {"node.kubernetes.io/instance-type": "m7i.2xlarge"}}}},
    }
    [finding] = placement.check([cordoned], [deployment], "v.yaml")[0]
    assert finding.severity == "warning", finding
