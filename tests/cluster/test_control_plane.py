"""The control plane itself: real version, real admission, fake nodes of the right shape, loopback only."""

from __future__ import annotations

import ipaddress
import os
import time
from pathlib import Path

import pytest
from kubernetes.utils import parse_quantity

from kvtier.cluster.common.rest import ApiException, Rest
from kvtier.cluster.kwok import lifecycle
from kvtier.toolchain import versions

GPU = "nvidia.com/gpu"


def _wait_phase(rest: Rest, namespace: str, pod: str, phase: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        body = rest.get(f"/api/v1/namespaces/{namespace}/pods/{pod}")
        if body.get("status", {}).get("phase") == phase or time.monotonic() > deadline:
            return body
        time.sleep(0.5)


def _pod(name: str, restart: str = "Never", **spec: object) -> dict:
    container = {
        "name": "main",
        "image": "registry.invalid/never-pulled:1",  # kwok never pulls or runs it
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    return {"metadata": {"name": name}, "spec": {"restartPolicy": restart, "containers": [container], **spec}}


def test_server_reports_the_pinned_version(kube_rest: Rest) -> None:
    assert kube_rest.get("/version")["gitVersion"] == versions()["KUBERNETES_VERSION"]


def test_mutating_admission_policy_is_served(kube_rest: Rest) -> None:
    for version in ("v1", "v1beta1"):
        kinds = {
            r["kind"] for r in kube_rest.get(f"/apis/admissionregistration.k8s.io/{version}")["resources"]
        }
        assert "MutatingAdmissionPolicy" in kinds, version


def test_leader_leases_outlast_a_stalled_api_server(kube_rest: Rest) -> None:
    """kwokctl passed our lease timings through: a controller manager on the default 15 s lease exits
    when two busy cores stall the API server, and the namespaces made after it get no ServiceAccount."""
    for component in ("kube-controller-manager", "kube-scheduler"):
        lease = kube_rest.get(f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{component}")
        assert lease["spec"]["leaseDurationSeconds"] == 180, (component, lease["spec"])


def test_fake_nodes_are_shaped_like_the_targets(kube_rest: Rest) -> None:
    nodes = kube_rest.get("/api/v1/nodes")["items"]
    gpu = [
        n
        for n in nodes
        if n["metadata"]["labels"].get("node.kubernetes.io/instance-type") == "ml.g6e.4xlarge"
    ]
    cpu = [n for n in nodes if GPU not in n["status"]["allocatable"]]
    assert len(gpu) >= 2 and cpu
    for node in gpu:
        assert node["status"]["allocatable"][GPU] == "1"
        assert parse_quantity(node["status"]["capacity"]["memory"]) == 128 * 2**30
        assert node["metadata"]["labels"]["kvtier.io/local-nvme"] == "true"
    for node in nodes:
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", node["metadata"]["name"]


def test_bare_never_pod_runs_and_completes(kube_rest: Rest, make_namespace) -> None:
    namespace = make_namespace("cp-never")
    kube_rest.post(f"/api/v1/namespaces/{namespace}/pods", _pod("once"))
    pod = _wait_phase(kube_rest, namespace, "once", "Succeeded")
    assert pod["status"]["phase"] == "Succeeded"
    assert pod["spec"]["nodeName"], "the real scheduler placed it"
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0


def test_long_running_pod_stays_running(kube_rest: Rest, make_namespace) -> None:
    namespace = make_namespace("cp-always")
    kube_rest.post(f"/api/v1/namespaces/{namespace}/pods", _pod("server", restart="Always"))
    pod = _wait_phase(kube_rest, namespace, "server", "Running")
    assert pod["status"]["phase"] == "Running"
    time.sleep(2)
    assert kube_rest.get(f"/api/v1/namespaces/{namespace}/pods/server")["status"]["phase"] == "Running"


def test_gpu_request_lands_on_a_gpu_node(kube_rest: Rest, make_namespace) -> None:
    namespace = make_namespace("cp-gpu")
    body = _pod("gpu", restart="Always")
    body["spec"]["containers"][0]["resources"] = {"limits": {GPU: "1"}}
    kube_rest.post(f"/api/v1/namespaces/{namespace}/pods", body)
    pod = _wait_phase(kube_rest, namespace, "gpu", "Running")
    node = kube_rest.get(f"/api/v1/nodes/{pod['spec']['nodeName']}")
    assert node["status"]["allocatable"].get(GPU) == "1"


def test_pod_security_is_enforced_by_the_api_server(kube_rest: Rest, make_namespace) -> None:
    namespace = make_namespace("cp-restricted", enforce="restricted")
    privileged = _pod("priv")
    privileged["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    with pytest.raises(ApiException) as denied:
        kube_rest.post(f"/api/v1/namespaces/{namespace}/pods", privileged)
    assert denied.value.status == 403 and "PodSecurity" in str(denied.value.body)
    kube_rest.post(f"/api/v1/namespaces/{namespace}/pods", _pod("fine"))  # a restricted pod is admitted


def test_every_component_listens_on_loopback_only(kube_cluster_info: lifecycle.ClusterInfo) -> None:
    pids = {
        p.stem: int(p.read_text()) for p in (lifecycle.workdir(kube_cluster_info.name) / "pids").glob("*.pid")
    }
    assert {"etcd", "kube-apiserver", "kwok-controller"} <= pids.keys()
    inodes = {pid: _socket_inodes(pid) for pid in pids.values()}
    listening = _listening_sockets()
    checked = 0
    for component, pid in pids.items():
        for inode in inodes[pid]:
            if inode in listening:
                address = listening[inode]
                mapped = getattr(address, "ipv4_mapped", None)
                assert address.is_loopback or (mapped and mapped.is_loopback), (
                    f"{component} listens on {address}"
                )
                checked += 1
    assert checked >= len(pids), "every component has at least one listening socket"


def _socket_inodes(pid: int) -> set[str]:
    out = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(target[8:-1])
    return out


def _listening_sockets() -> dict[str, ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """inode -> local address of every TCP socket in LISTEN state (/proc/net/tcp and tcp6)."""
    out = {}
    for table, width in (("tcp", 8), ("tcp6", 32)):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A":  # LISTEN
                out[inode] = _address(local.split(":")[0], width)
    return out


def _address(hex_ip: str, width: int) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    raw = bytes.fromhex(hex_ip)
    if width == 8:
        return ipaddress.IPv4Address(raw[::-1])
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))  # each 32-bit word is little-endian
    return ipaddress.IPv6Address(words)


def test_a_component_that_cannot_start_is_named_with_its_log(
    kube_cluster_info: lifecycle.ClusterInfo,
) -> None:
    """An API server given a group it does not know refuses to start; the error says which and where."""
    from kvtier.errors import UserError

    name = f"{kube_cluster_info.name}-broken"
    try:
        with pytest.raises(UserError) as failed:
            lifecycle.up(
                name,
                timeout=90,
                runtime_config_extra="no.such.group.example/v9=true",
                progress=lambda _: None,
            )
        message = str(failed.value)
        assert "kube-apiserver" in message
        assert str(lifecycle.log_path(name, "kube-apiserver")) in message
    finally:
        lifecycle.down(name, progress=lambda _: None)
