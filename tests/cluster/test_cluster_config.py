"""The kwokctl configuration and KWOK data the cluster is built from (no cluster needed)."""

from __future__ import annotations

from pathlib import Path

import yaml

from kvtier.cluster.common import binaries
from kvtier.cluster.kwok import config as kwokconfig
from kvtier.cluster.kwok import nodes


def _docs() -> list[dict]:
    tools = {tool: Path(f"/cache/bin/{tool}") for tool in binaries.TOOLS}
    return list(yaml.safe_load_all(kwokconfig.render(tools, binaries.kubernetes_minor())))


def test_every_binary_is_local_and_every_port_on_loopback() -> None:
    options = _docs()[0]["options"]
    assert options["runtime"] == "binary" and options["bindAddress"] == "127.0.0.1"
    for key in (
        "kubeApiserverBinary",
        "kubeControllerManagerBinary",
        "kubeSchedulerBinary",
        "kubectlBinary",
        "etcdBinary",
        "kwokControllerBinary",
    ):
        assert options[key].startswith("/cache/bin/"), key  # a path, never a download URL
    assert options["kubeAdmission"] and options["kubeAuthorization"], "Pod Security and RBAC are real"


def test_stages_cover_the_whole_lifecycle() -> None:
    stages = {d["metadata"]["name"]: d["spec"] for d in _docs()[1:]}
    assert set(stages) == {
        "node-ready",
        "node-heartbeat",
        "pod-running",
        "pod-job-done",
        "pod-never-done",
        "pod-gone",
    }
    never = {e["key"]: e for e in stages["pod-never-done"]["selector"]["matchExpressions"]}
    assert never[".spec.restartPolicy"]["values"] == ["Never"]
    assert never[".metadata.ownerReferences"]["operator"] == "DoesNotExist", "bare pods only (helm test)"
    assert "phase: Succeeded" in stages["pod-never-done"]["next"]["statusTemplate"]


def test_extra_runtime_config_is_appended() -> None:
    tools = {tool: Path(f"/cache/bin/{tool}") for tool in binaries.TOOLS}
    text = kwokconfig.render(tools, 37, "admissionregistration.k8s.io/v1beta1=false")
    options = next(yaml.safe_load_all(text))["options"]
    assert options["kubeRuntimeConfig"].endswith(",admissionregistration.k8s.io/v1beta1=false")


def test_gpu_nodes_look_like_g6e_4xlarge() -> None:
    gpu = [n for n in nodes.manifests() if "nvidia.com/gpu" in n["status"]["allocatable"]]
    assert gpu
    for node in gpu:
        assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "ml.g6e.4xlarge"
        assert node["status"]["capacity"]["cpu"] == "16"
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == node["metadata"]["name"]
