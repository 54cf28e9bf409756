"""The kubelet rules (kvtier.validate.checks.kubelet_rules) and the schema bounds that go with them: what the
API server admits but the kubelet refuses or runs wrong, and HPA/S3 values the consumer refuses."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from harness.manifests import run_rule, workload
from kvtier import paths
from kvtier.validate import catalogue
from kvtier.validate.layers import schema_check

BYTES = "kube-byte-quantity-whole"
ROOT = "kube-runasnonroot-root-uid"


def _container(name: str = "router", **resources: Any) -> dict[str, Any]:
    return {"name": name, "image": "r:v1", "resources": resources or {"limits": {"memory": "2Gi"}}}


def _deployment(*containers: dict[str, Any], pod_sc: Any = None, **spec: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": list(containers) or [_container()], **spec}
    if pod_sc is not None:
        pod["securityContext"] = pod_sc
    return workload(pod, name="r")


def test_rules_are_registered_for_the_rendered_objects() -> None:
    rules = catalogue.all_rules()
    assert rules[BYTES].scope == rules[ROOT].scope == "manifests"
    assert "verifyRunAsNonRoot" in rules[ROOT].reason
    assert "warnings.go" in rules[BYTES].reason


# --- byte quantities ---------------------------------------------------------------------------------


def test_milli_memory_limit_is_an_error_naming_container_and_fix() -> None:
    [f] = run_rule(BYTES, _deployment(_container(limits={"memory": "2048m"})))
    assert f.severity == "error" and f.rule == BYTES
    assert f.subject == "Deployment/r"
    assert f.path == "spec.template.spec.containers[0].resources.limits.memory"
    assert "container router" in f.message and "'2048m' is 2.048 bytes" in f.message
    assert "rounds it up to 3 bytes" in f.message and "2048Mi" in f.message


def test_milli_memory_request_is_a_warning() -> None:
    # A request of a byte reserves nothing but the container runs (the kubelet rounds it up).
    [f] = run_rule(BYTES, _deployment(_container(requests={"memory": "512m"}, limits={"memory": "2Gi"})))
    assert f.severity == "warning"
    assert f.path.endswith("containers[0].resources.requests.memory")
    assert "rounds it up to 1 byte." in f.message and "512Mi" in f.message


@pytest.mark.parametrize(
    "memory",
    ["512Mi", "2Gi", "1G", "512M", "1.5Gi", "0.5Ki", "1e3", 1073741824, "1k", "3000m", "2000000u"],
)
def test_whole_byte_quantities_pass(memory: Any) -> None:
    res = {"requests": {"memory": memory, "cpu": "500m"}, "limits": {"memory": memory}}
    assert run_rule(BYTES, _deployment(_container(**res))) == []


@pytest.mark.parametrize(
    ("memory", "severity"),
    [
        ("1048575999m", "error"),  # 1048575.999 bytes: under a MiB
        ("1048576500m", "warning"),  # 1048576.5 bytes: a MiB and more, only rounded up
        ("0.1Gi", "warning"),  # 107374182.4 bytes
        (1.5, "error"),  # a YAML float: 1.5 bytes
        ("1500u", "error"),
        ("0.5", "error"),
    ],
)
def test_fractional_limits_by_size(memory: Any, severity: str) -> None:
    [f] = run_rule(BYTES, _deployment(_container(limits={"memory": memory})))
    assert f.severity == severity


@pytest.mark.parametrize("resource", ["ephemeral-storage", "hugepages-2Mi", "hugepages-1Gi"])
def test_every_byte_resource_is_judged(resource: str) -> None:
    [f] = run_rule(BYTES, _deployment(_container(limits={resource: "100m"})))
    assert f.path.endswith(f"resources.limits.{resource}") and f.severity == "error"


@pytest.mark.parametrize("resource", ["cpu", "nvidia.com/gpu", "pods"])
def test_resources_not_counted_in_bytes_are_left_alone(resource: str) -> None:
    assert run_rule(BYTES, _deployment(_container(limits={resource: "500m"}))) == []


def test_unparseable_quantity_is_left_to_the_api_server() -> None:
    assert run_rule(BYTES, _deployment(_container(limits={"memory": "lots"}))) == []


def test_init_containers_pod_level_and_every_kind_are_read() -> None:
    bad = _container("init", limits={"memory": "64m"})
    deployment = _deployment(_container(), initContainers=[bad], resources={"limits": {"memory": "8m"}})
    paths_found = {f.path for f in run_rule(BYTES, deployment)}
    assert paths_found == {
        "spec.template.spec.initContainers[0].resources.limits.memory",
        "spec.template.spec.resources.limits.memory",
    }
    pod_spec = {"containers": [_container("c", limits={"memory": "1m"})]}
    cron = {
        "kind": "CronJob",
        "metadata": {"name": "evict"},
        "spec": {"jobTemplate": {"spec": {"template": {"spec": copy.deepcopy(pod_spec)}}}},
    }
    pod = {"kind": "Pod", "metadata": {"name": "t"}, "spec": copy.deepcopy(pod_spec)}
    found = {(f.subject, f.path) for f in run_rule(BYTES, cron, pod)}
    assert found == {
        ("CronJob/evict", "spec.jobTemplate.spec.template.spec.containers[0].resources.limits.memory"),
        ("Pod/t", "spec.containers[0].resources.limits.memory"),
    }


def test_hyperpod_endpoint_worker_resources_are_read() -> None:
    worker = {"resources": {"requests": {"memory": "96Gi"}, "limits": {"memory": "110500m"}}}
    endpoint = {"kind": "InferenceEndpointConfig", "metadata": {"name": "m"}, "spec": {"worker": worker}}
    [f] = run_rule(BYTES, endpoint)
    assert (f.subject, f.path, f.severity) == (
        "InferenceEndpointConfig/m",
        "spec.worker.resources.limits.memory",
        "error",
    )
    worker["resources"]["limits"]["memory"] = "110Gi"
    assert run_rule(BYTES, endpoint) == []


def test_objects_without_pods_are_ignored() -> None:
    cm = {"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"memory": "512m"}}
    assert run_rule(BYTES, cm, {"kind": "Deployment", "metadata": {"name": "x"}}) == []


# --- runAsNonRoot with UID 0 ---------------------------------------------------------------------------


def _with_sc(sc: Any = None, name: str = "vllm") -> dict[str, Any]:
    c = _container(name)
    if sc is not None:
        c["securityContext"] = sc
    return c


def test_pod_level_root_uid_with_non_root_policy_is_refused() -> None:
    [f] = run_rule(ROOT, _deployment(_with_sc(), pod_sc={"runAsNonRoot": True, "runAsUser": 0}))
    assert f.severity == "error" and f.subject == "Deployment/r"
    assert f.path == "spec.template.spec.securityContext.runAsUser"
    assert "container vllm" in f.message and "breaks non-root policy" in f.message
    assert "runAsUser 0 (the pod's securityContext)" in f.message


def test_container_root_uid_under_pod_non_root_policy_is_refused() -> None:
    deployment = _deployment(_with_sc({"runAsUser": 0}), pod_sc={"runAsNonRoot": True, "runAsUser": 1000})
    [f] = run_rule(ROOT, deployment)
    assert f.path == "spec.template.spec.containers[0].securityContext.runAsUser"
    assert "runAsUser 0 (its securityContext) with runAsNonRoot true (the pod's securityContext)" in f.message


def test_container_non_root_policy_over_pod_root_uid_is_refused() -> None:
    deployment = _deployment(_with_sc({"runAsNonRoot": True}), pod_sc={"runAsUser": 0})
    [f] = run_rule(ROOT, deployment)
    assert f.path == "spec.template.spec.securityContext.runAsUser"


@pytest.mark.parametrize(
    ("container_sc", "pod_sc"),
    [
        ({"runAsUser": 1000}, {"runAsNonRoot": True, "runAsUser": 0}),  # the container's UID wins
        ({"runAsNonRoot": False}, {"runAsNonRoot": True, "runAsUser": 0}),  # the container may run as root
        (None, {"runAsNonRoot": True, "runAsUser": 1}),  # the lowest non-root UID
        (None, {"runAsNonRoot": True}),  # the image's user: only the kubelet can see it
        (None, {"runAsNonRoot": False, "runAsUser": 0}),
        (None, {"runAsUser": 0}),  # root, but nothing forbids it
        ({"runAsUser": False}, {"runAsNonRoot": True}),  # not a UID: the API server refuses the type
        ({"runAsUser": None, "runAsNonRoot": None}, {"runAsNonRoot": True, "runAsUser": 65534}),
    ],
)
def test_allowed_combinations_pass(container_sc: Any, pod_sc: dict[str, Any]) -> None:
    assert run_rule(ROOT, _deployment(_with_sc(container_sc), pod_sc=pod_sc)) == []


def test_explicit_null_in_the_container_falls_back_to_the_pod() -> None:
    deployment = _deployment(_with_sc({"runAsUser": None}), pod_sc={"runAsNonRoot": True, "runAsUser": 0})
    assert len(run_rule(ROOT, deployment)) == 1


def test_each_container_is_judged_on_its_own_context() -> None:
    deployment = _deployment(
        _with_sc({"runAsUser": 1000}, "ok"),
        _with_sc(None, "root"),
        pod_sc={"runAsNonRoot": True, "runAsUser": 0},
        initContainers=[_with_sc(None, "init")],
    )
    messages = [f.message for f in run_rule(ROOT, deployment)]
    assert len(messages) == 2
    assert any("container root" in m for m in messages) and any("container init" in m for m in messages)


def test_windows_pods_are_not_judged_by_uid() -> None:
    deployment = _deployment(
        _with_sc(), pod_sc={"runAsNonRoot": True, "runAsUser": 0}, os={"name": "windows"}
    )
    assert run_rule(ROOT, deployment) == []


# --- schema bounds ---------------------------------------------------------------------------------------


def _schema(*keys: str) -> Draft202012Validator:
    node = schema_check.bundled(paths.SCHEMA / "kv-tiered-inference.values.schema.json")
    for key in keys:
        node = node["items"] if key == "[]" else node["properties"][key]
    return Draft202012Validator(node)


@pytest.mark.parametrize(
    ("key", "good", "bad"),
    [
        ("periodSeconds", [1, 300, 1800], [0, 1801, 3600]),
        ("stabilizationWindowSeconds", [0, 600, 3600], [-1, 3601]),
    ],
)
def test_hpa_behavior_bounds_of_the_api_server(key: str, good: list[int], bad: list[int]) -> None:
    v = _schema("engine", "autoscaling", "scaleDown", key)
    assert "pkg/apis/autoscaling/validation" in v.schema["description"]
    assert all(v.is_valid(n) for n in good)
    assert not any(v.is_valid(n) for n in bad)


@pytest.mark.parametrize(
    "bucket", ["acme-models", "abc", "my.bucket.2024", "a" * 63, "0bucket9", "amzn-models", "x-n--ok"]
)
def test_s3_bucket_names_aws_accepts(bucket: str) -> None:
    assert _schema("models", "[]", "source", "s3", "bucket").is_valid(bucket)


@pytest.mark.parametrize(
    "bucket",
    [
        "s3://acme-models",
        "acme-models/qwen2-7b/",
        "Acme-Models",
        "ab",
        "a" * 64,
        "-acme",
        "acme-",
        "acme.",
        "acme..models",
        "acme_models",
        "192.168.5.4",
        "xn--acme",
        "sthree-acme",
        "amzn-s3-demo-acme",
        "acme-s3alias",
        "acme--ol-s3",
        "acme.mrap",
        "acme--x-s3",
        "acme--table-s3",
        "",
    ],
)
def test_s3_bucket_names_aws_refuses(bucket: str) -> None:
    v = _schema("models", "[]", "source", "s3", "bucket")
    assert not v.is_valid(bucket)
    assert "path" in v.schema["description"]
