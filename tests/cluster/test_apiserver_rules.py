"""The API server's cross-field validation, as kvtier.validate.checks.apiserver_rules writes it offline,
against the real API server: seeded objects drawn across each rule's fields (security contexts, volumes and
mounts, host-network ports, claims, NetworkPolicy peers and ports), every other field valid, go to the test
cluster's server-side dry run and to the offline layers (the Kubernetes schema check plus the rules). The
verdicts must agree object for object: a refusal the rules miss, or one they invent, fails the test.

KVTIER_APIRULES_CASES (default 400) sets how many objects, KVTIER_APIRULES_SEED the seed.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from kvtier.cluster.common.rest import Rest
from kvtier.validate import catalogue
from kvtier.validate.layers import kube, server
from kvtier.validate.rules import ManifestsContext

CASES = int(os.environ.get("KVTIER_APIRULES_CASES", "400"))
SEED = int(os.environ.get("KVTIER_APIRULES_SEED", "20261203"))
RULES = ["kube-escalation-contradiction", "kube-volume-mounts", "kube-hostnetwork-ports", "kube-claim-spec"]
RULES += ["kube-networkpolicy-peers", "kube-env-vars"]
MINOR = "1.35"
MODES = ["ReadWriteOnce", "ReadWriteMany", "ReadOnlyMany", "ReadWriteOncePod"]
CIDRS = [
    "10.0.0.0/8",
    "10.1.0.0/16",
    "10.1.2.0/24",
    "192.168.0.0/16",
    "10.0.0.0/8",
    "fd00::/8",
    "fd00:1::/32",
]


def _maybe(rng: random.Random, choices: list[Any]) -> Any:
    return rng.choice([None, *choices])


def _container(rng: random.Random, name: str, volumes: list[str]) -> dict[str, Any]:
    sc: dict[str, Any] = {}
    for key in ("privileged", "allowPrivilegeEscalation"):
        value = _maybe(rng, [True, False])
        if value is not None:
            sc[key] = value
    if rng.random() < 0.5:
        sc["capabilities"] = {
            "add": rng.sample(["CAP_SYS_ADMIN", "SYS_ADMIN", "NET_ADMIN"], rng.randint(0, 2))
        }
    paths = ["/a", "/b", "/dev/shm"] if rng.random() < 0.2 else ["/a", "/b", "/c", "/d", "/e", "/f"]
    names = [*volumes, "undeclared"] if rng.random() < 0.15 or not volumes else volumes
    mounts = [{"name": rng.choice(names), "mountPath": rng.choice(paths)} for _ in range(rng.randint(0, 2))]
    port: dict[str, Any] = {"containerPort": 8000}
    host = _maybe(rng, [8000, 9000])
    if host is not None:
        port["hostPort"] = host
    return {
        "name": name,
        "image": "registry.invalid/never-pulled:1",
        "securityContext": sc,
        "volumeMounts": mounts,
        "ports": [port],
        "env": [_env(rng) for _ in range(rng.choice([0, 0, 1, 2]))],
    }


def _env(rng: random.Random) -> dict[str, Any]:
    var: dict[str, Any] = {
        "name": rng.choice(["HF_HOME", "HF_HOME", "my.var-1", "A=B", "X Y", "\u00e9t\u00e9", ""])
    }
    value = _maybe(rng, ["v", ""])
    if value is not None:
        var["value"] = value
    if rng.random() < 0.5:
        refs = {"secretKeyRef": {"name": "s", "key": "k"}, "configMapKeyRef": {"name": "c", "key": "k"}}
        var["valueFrom"] = {key: refs[key] for key in rng.sample(sorted(refs), rng.choice([0, 1, 1, 2]))}
    return var


def _claim_spec(rng: random.Random) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": [rng.choice(MODES)]}
    if rng.random() < 0.4:
        spec["accessModes"] = rng.sample([*MODES, "ReadWriteAlways"], rng.randint(0, 2))
    size = rng.choice(["1Gi", "1Gi", "500G", "1", "0", "0Gi", None])
    spec["resources"] = {"requests": {"storage": size}} if size is not None else {}
    return spec


def _pod_spec(rng: random.Random) -> dict[str, Any]:
    volumes = rng.sample(["a", "b", "a", "c"] if rng.random() < 0.2 else ["a", "b", "c"], rng.randint(0, 3))
    spec: dict[str, Any] = {
        "containers": [_container(rng, "main", volumes)],
        "volumes": [{"name": v, "emptyDir": {}} for v in volumes],
        "hostNetwork": rng.random() < 0.4,
    }
    if rng.random() < 0.3:
        spec["volumes"].append(
            {"name": "eph", "ephemeral": {"volumeClaimTemplate": {"spec": _claim_spec(rng)}}}
        )
    return spec


def _pod(rng: random.Random, i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"}, "spec": _pod_spec(rng)}


def _statefulset(rng: random.Random, i: int) -> dict[str, Any]:
    spec = _pod_spec(rng)
    templates = [{"metadata": {"name": "c"}, "spec": _claim_spec(rng)}] if rng.random() < 0.7 else []
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": f"s{i}"},
        "spec": {
            "serviceName": "s",
            "selector": {"matchLabels": {"app": "s"}},
            "template": {"metadata": {"labels": {"app": "s"}}, "spec": spec},
            "volumeClaimTemplates": templates,
        },
    }


def _claim(rng: random.Random, i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": f"c{i}"},
        "spec": _claim_spec(rng),
    }


def _peer(rng: random.Random) -> dict[str, Any]:
    peer: dict[str, Any] = {}
    count = rng.choice([0, 1, 1, 1, 1, 1, 2, 3])
    for key in rng.sample(["podSelector", "namespaceSelector", "ipBlock"], count):
        if key == "ipBlock":
            block: dict[str, Any] = {"cidr": rng.choice(CIDRS)}
            if rng.random() < 0.4:
                block["except"] = rng.sample(CIDRS, rng.randint(1, 2))
            peer[key] = block
        else:
            peer[key] = {}
    return peer


def _port(rng: random.Random) -> dict[str, Any]:
    port: dict[str, Any] = {"protocol": "TCP"}
    for key, values in (("port", [80, 80, "http"]), ("endPort", [None, None, 70, 80, 90])):
        value = _maybe(rng, values)
        if value is not None:
            port[key] = value
    return port


def _policy(rng: random.Random, i: int) -> dict[str, Any]:
    direction, peers = rng.choice([("ingress", "from"), ("egress", "to")])
    rule = {peers: [_peer(rng) for _ in range(rng.randint(1, 2))], "ports": [_port(rng)]}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"n{i}"},
        "spec": {"podSelector": {}, direction: [rule]},
    }


MAKERS = (_pod, _statefulset, _claim, _policy)


def _offline(manifest: dict[str, Any], namespace: str) -> list[str]:
    found = [
        f.message for f in catalogue.run_manifests(ManifestsContext([manifest], namespace), "x", only=RULES)
    ]
    return found + (kube.check(manifest, MINOR) or [])


def _wait_default_account(rest: Rest, namespace: str) -> None:
    deadline = time.monotonic() + 60
    while rest.find(f"/api/v1/namespaces/{namespace}/serviceaccounts/default") is None:
        assert time.monotonic() < deadline, "the controller manager made no default ServiceAccount"
        time.sleep(0.5)


def test_the_rules_agree_with_the_api_server_object_for_object(kube_rest: Rest, make_namespace) -> None:
    namespace = make_namespace("apirules", enforce="privileged")
    _wait_default_account(kube_rest, namespace)
    judge = server.Judge(kube_rest, namespace, "the test cluster")
    rng = random.Random(SEED)
    disagreements, refused = [], 0
    for i in range(CASES):
        manifest = rng.choice(MAKERS)(rng, i)
        status = judge.apply(manifest)
        offline = _offline(manifest, namespace)
        refused += status is not None
        if (status is not None) != bool(offline):
            disagreements.append((manifest, (status or {}).get("message"), offline))
    assert not disagreements, (len(disagreements), disagreements[:3])
    assert refused > CASES // 5, "too few refusals: the generator tests little"
    assert refused < CASES * 4 // 5, "too few accepted objects: the generator tests little"
    print(f"\n{CASES} objects (seed {SEED}): the API server refused {refused}; the offline verdict agreed")
