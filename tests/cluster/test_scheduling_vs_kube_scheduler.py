"""kvtier.scheduling against the test cluster's real kube-scheduler: generated nodes (labels, taints,
cordons, allocatable) and generated pods (tolerations, nodeSelector, node affinity, requests with init
containers), each pod aimed at one node by its hostname label; "the node could take it" must equal whether
the scheduler binds it, so every filter decides on its own node, not hidden by another node that fits.

Every node of this test carries a taint of its own and a label of its own, and every pod tolerates and
selects them, so no other pod lands on these nodes and these pods land nowhere else. Pods go one at a
time and are deleted before the next, so each meets empty nodes, as the function assumes.
"""

from __future__ import annotations

import random
import time
from typing import Any

from harness import node_pool
from kvtier import scheduling
from kvtier.cluster.common.rest import Rest
from kvtier.cluster.kwok import nodes as fake_nodes

SEED = 20261203
NODES = 12
PODS = 200
RUN_KEY = "kvtier.test/scheduling"

TAINTS = [
    {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
    {"key": "dedicated", "value": "inference", "effect": "NoSchedule"},
    {"key": "maintenance", "effect": "NoExecute"},
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
]
TOLERATIONS = [
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent"},
    {"key": "dedicated", "operator": "Equal", "value": "inference"},
    {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"},
    {"key": "maintenance", "operator": "Exists"},
    {"operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]
EXPRESSIONS = [
    {"key": "zone", "operator": "In", "values": ["a", "b"]},
    {"key": "zone", "operator": "NotIn", "values": ["a"]},
    {"key": "gpu", "operator": "Exists"},
    {"key": "gpu", "operator": "In", "values": ["present"]},
    {"key": "gpu", "operator": "DoesNotExist"},
    {"key": "tier", "operator": "Gt", "values": ["2"]},
    {"key": "tier", "operator": "Lt", "values": ["2"]},
]


def _node(rng: random.Random, run: str, i: int) -> dict[str, Any]:
    labels = {
        "kubernetes.io/hostname": f"sched-{run}-{i}",
        RUN_KEY: run,
        fake_nodes.FAKE_LABEL: "true",
        "zone": rng.choice("abc"),
        "tier": str(rng.randint(1, 4)),
    }
    if rng.random() < 0.5:
        labels["gpu"] = "present"
    if rng.random() < 0.2:
        del labels["zone"]  # NotIn and DoesNotExist hold for a missing label
    taints = [{"key": RUN_KEY, "value": run, "effect": "NoSchedule"}]
    taints += [t for t in TAINTS if rng.random() < 0.35]
    allocatable = {
        "cpu": rng.choice(["1", "2", "4"]),
        "memory": rng.choice(["2Gi", "4Gi", "8Gi"]),
        "nvidia.com/gpu": str(rng.choice([0, 1, 2])),
        "pods": "10",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"sched-{run}-{i}", "labels": labels},
        "spec": {"taints": taints, "unschedulable": rng.random() < 0.2},
        "status": {"capacity": allocatable, "allocatable": allocatable},
    }


def _requests(rng: random.Random) -> dict[str, Any]:
    requests: dict[str, str] = {}
    if rng.random() < 0.6:
        requests["cpu"] = rng.choice(["250m", "500m", "1", "1500m", "3"])
    if rng.random() < 0.5:
        requests["memory"] = rng.choice(["256Mi", "512Mi", "2Gi", "6Gi"])
    resources: dict[str, Any] = {"requests": requests} if requests else {}
    if rng.random() < 0.2:
        resources["limits"] = {"nvidia.com/gpu": str(rng.choice([1, 2]))}
    return resources


def _pod(rng: random.Random, run: str, i: int, node: str) -> dict[str, Any]:
    """A pod aimed at `node` that meets one or two of the filters; what it does not draw it passes
    (every taint tolerated, no requests), so the drawn filter is the one that decides."""
    features = rng.sample(["tolerations", "affinity", "resources", "init", "zone"], rng.randint(1, 2))
    tolerations = (
        [t for t in TOLERATIONS if rng.random() < 0.5]
        if "tolerations" in features
        else [{"operator": "Exists"}]
    )
    spec: dict[str, Any] = {
        "nodeSelector": {RUN_KEY: run, "kubernetes.io/hostname": node},
        "tolerations": [
            {"key": RUN_KEY, "operator": "Equal", "value": run, "effect": "NoSchedule"},
            *tolerations,
        ],
        "containers": [
            {"name": "c", "image": "busybox", "resources": _requests(rng) if "resources" in features else {}}
        ],
        "automountServiceAccountToken": False,
    }
    if "zone" in features:
        spec["nodeSelector"]["zone"] = rng.choice("abc")
    if "affinity" in features:
        terms = [
            {"matchExpressions": rng.sample(EXPRESSIONS, rng.randint(1, 2))} for _ in range(rng.randint(1, 2))
        ]
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        }
    if "init" in features:
        spec["containers"][0]["resources"] = _requests(rng)
        init = {"name": "init", "image": "busybox", "resources": _requests(rng)}
        if rng.random() < 0.5:
            init["restartPolicy"] = "Always"  # a sidecar: its requests add to the containers'
        else:  # an ordinary init container runs alone: often the pod's largest step
            init["resources"] = {"requests": {"cpu": rng.choice(["1500m", "3"])}}
        spec["initContainers"] = [init]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"}, "spec": spec}


def _scheduled(rest: Rest, namespace: str, name: str) -> bool:
    """True once the scheduler binds the pod, False once it reports it Unschedulable."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pod = rest.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
        if pod["spec"].get("nodeName"):
            return True
        for condition in pod.get("status", {}).get("conditions") or []:
            if condition["type"] == "PodScheduled" and condition.get("reason") == "Unschedulable":
                return False
        time.sleep(0.1)
    raise AssertionError(f"the scheduler decided nothing on pod {namespace}/{name} in 60 s")


def _delete(rest: Rest, namespace: str, name: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    rest.request("DELETE", path, {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
    deadline = time.monotonic() + 30
    while rest.find(path) is not None:
        assert time.monotonic() < deadline, f"pod {namespace}/{name} still there 30 s after deletion"
        time.sleep(0.1)


def _served(rest: Rest, run: str) -> list[dict[str, Any]]:
    return node_pool.served(rest, f"{RUN_KEY}={run}")


def test_a_node_fits_exactly_when_the_scheduler_binds_the_pod_there(kube_rest: Rest, make_namespace) -> None:
    namespace = make_namespace("scheduling", enforce="privileged")
    rng = random.Random(SEED)
    run = node_pool.run_id()
    nodes = [_node(rng, run, i) for i in range(NODES)]
    with node_pool.added(kube_rest, nodes, f"{RUN_KEY}={run}"):
        disagreements, bound = [], 0
        for i in range(PODS):
            pod = _pod(rng, run, i, f"sched-{run}-{rng.randrange(NODES)}")
            served = _served(kube_rest, run)
            predicted = any(scheduling.refusal(pod["spec"], n) is None for n in served)
            kube_rest.post(f"/api/v1/namespaces/{namespace}/pods", pod)
            actual = _scheduled(kube_rest, namespace, pod["metadata"]["name"])
            _delete(kube_rest, namespace, pod["metadata"]["name"])
            bound += actual
            if predicted != actual:
                reasons = {n["metadata"]["name"]: scheduling.refusal(pod["spec"], n) for n in served}
                disagreements.append((actual, pod["spec"], reasons))
        assert not disagreements, (len(disagreements), disagreements[:2], nodes)
        assert PODS // 5 < bound < PODS * 4 // 5, f"{bound} of {PODS} bound: the generator tests little"
        print(f"scheduling: {bound} of {PODS} pods bound, {PODS - bound} refused, every verdict as predicted")
