"""Every rule over rendered manifests: one case that triggers it and one that passes it."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kvtier.validate import catalogue
from kvtier.validate.checks import podsecurity
from kvtier.validate.rules import ManifestsContext

CONTAINER = {
    "name": "engine",
    "image": "lmcache/vllm-openai:v0.3.7",
    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    "ports": [{"name": "http", "containerPort": 8000}],
    "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}},
    "livenessProbe": {"httpGet": {"path": "/health", "port": 8000}},
    "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}],
}
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "engine"},
    "spec": {
        "template": {
            "spec": {
                "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [CONTAINER],
                "volumes": [{"name": "l2", "persistentVolumeClaim": {"claimName": "l2"}}],
            }
        }
    },
}
ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "Role",
    "metadata": {"name": "router"},
    "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
}
Mutation = Callable[[list[dict[str, Any]]], None]


def _container(**changes: Any) -> Mutation:
    def mutate(manifests: list[dict[str, Any]]) -> None:
        c = manifests[0]["spec"]["template"]["spec"]["containers"][0]
        for key, value in changes.items():
            if value is None:
                c.pop(key, None)
            else:
                c[key] = value

    return mutate


def _pod(**changes: Any) -> Mutation:
    def mutate(manifests: list[dict[str, Any]]) -> None:
        manifests[0]["spec"]["template"]["spec"].update(changes)

    return mutate


def _unchanged(manifests: list[dict[str, Any]]) -> None:
    return None


def _add(manifest: dict[str, Any]) -> Mutation:
    return lambda manifests: manifests.append(manifest)


def _both(*mutations: Mutation) -> Mutation:
    def mutate(manifests: list[dict[str, Any]]) -> None:
        for mutation in mutations:
            mutation(manifests)

    return mutate


def _ephemeral(*modes: str) -> dict[str, Any]:
    spec = {"accessModes": list(modes), "resources": {"requests": {"storage": "1Gi"}}}
    return {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": spec}}}


def _policy(*peers: dict[str, Any]) -> dict[str, Any]:
    spec = {"podSelector": {}, "ingress": [{"from": list(peers)}]}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "p"},
        "spec": spec,
    }


def _engine(name: str, seed: str | None = "0", dtype: str = "float16") -> dict[str, Any]:
    engine = copy.deepcopy(DEPLOYMENT)
    engine["metadata"]["name"] = name
    c = engine["spec"]["template"]["spec"]["containers"][0]
    c.update(command=["vllm"], args=["serve", "Qwen/Qwen2-7B-Instruct", "--dtype", dtype])
    c["env"] = [{"name": "PYTHONHASHSEED", "value": seed}] if seed is not None else []
    return engine


def _with_args(*extra: str) -> Mutation:
    """An engine whose vllm args end with `extra`."""

    def mutate(manifests: list[dict[str, Any]]) -> None:
        engine = _engine("a")
        engine["spec"]["template"]["spec"]["containers"][0]["args"] += list(extra)
        manifests.append(engine)

    return mutate


CASES: dict[str, tuple[Mutation, Mutation, str]] = {
    "engine-args-rendered": (
        _with_args("--max-model-len", "8192", "--max_num_seqs=4", "--enforce-eager"),
        _with_args("--max-model-len", "8192", "--enforce-eager", "--max_model_len=1"),
        "sets --max-model-len 2 times (args[4] '--max-model-len', args[7] '--max_model_len=1'): vLLM runs "
        "with the last, '1'",
    ),
    "crosspod-rendered": (
        lambda manifests: manifests.extend([_engine("a"), _engine("b")]),
        lambda manifests: manifests.extend([_engine("a"), _engine("b", seed=None)]),
        "PYTHONHASHSEED None",
    ),
    "image-no-latest": (
        _container(image="repo@sha256:" + "a" * 64),
        _container(image="lmcache/vllm-openai:latest"),
        ":latest",
    ),
    "image-reference-parses": (
        _container(image="ghcr.io/org/vllm-openai:v0.4.9_cu128@sha256:" + "b" * 64),
        _container(image="docker.io//lmcache/vllm-openai:v0.4.9"),
        "which the kubelet cannot parse (repository '/lmcache/vllm-openai'",
    ),
    "resources-every-container": (
        _container(resources={"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"memory": "2Gi"}}),
        _container(resources={"requests": {"cpu": "1"}}),
        "memory, limits.memory",
    ),
    "policy-security-context": (
        _container(securityContext={"privileged": True}),
        _container(securityContext=None),
        "no securityContext",
    ),
    "policy-probes": (
        _add(
            {
                "kind": "Job",
                "metadata": {"name": "t"},
                "spec": {"template": {"spec": {"containers": [{"name": "t"}]}}},
            }
        ),
        _container(livenessProbe=None),
        "lacks livenessProbe",
    ),
    "policy-pod-security": (
        _unchanged,
        _pod(volumes=[{"name": "nvme", "hostPath": {"path": "/data"}}]),
        "needs Pod Security 'privileged' but namespace kv enforces 'restricted'",
    ),
    "policy-rbac-no-wildcards": (
        _add(ROLE),
        _add({**ROLE, "rules": [{"apiGroups": ["*"], "resources": ["pods"], "verbs": ["get"]}]}),
        "'*' in apiGroups",
    ),
    "objects-unique": (
        # the same name in another namespace, or of another kind, is another object
        lambda manifests: manifests.extend(
            [
                {**copy.deepcopy(DEPLOYMENT), "metadata": {"name": "engine", "namespace": "other"}},
                {**copy.deepcopy(DEPLOYMENT), "kind": "StatefulSet"},
            ]
        ),
        _add(copy.deepcopy(DEPLOYMENT)),
        "Deployment 'engine' is rendered more than once",
    ),
    "policy-no-inline-secrets": (
        # an empty Secret, and a key expanded by the kubelet from another (Secret-backed) variable
        lambda manifests: (
            _add({"kind": "Secret", "metadata": {"name": "empty"}})(manifests),
            _container(env=[{"name": "VLLM_API_KEY", "value": "$(FROM_SECRET)"}])(manifests),
        ),
        _container(env=[{"name": "HF_TOKEN", "value": "hf_abc"}]),
        "literal value",
    ),
    "kube-byte-quantity-whole": (
        _container(resources={"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}}),
        _container(resources={"requests": {"cpu": "1", "memory": "512m"}, "limits": {"memory": "2048m"}}),
        "'2048m' is 2.048 bytes",
    ),
    "kube-runasnonroot-root-uid": (
        _pod(securityContext={"runAsNonRoot": True, "runAsUser": 1000}),
        _pod(securityContext={"runAsNonRoot": True, "runAsUser": 0}),
        "breaks non-root policy",
    ),
    "kube-escalation-contradiction": (
        _container(securityContext={"allowPrivilegeEscalation": True, "privileged": True}),
        _container(securityContext={"allowPrivilegeEscalation": False, "privileged": True}),
        "privileged: true",
    ),
    "kube-volume-mounts": (
        _container(volumeMounts=[{"name": "l2", "mountPath": "/l2"}]),
        _container(
            volumeMounts=[{"name": "l2", "mountPath": "/dev/shm"}, {"name": "l2", "mountPath": "/dev/shm"}]
        ),
        "mounts two volumes at '/dev/shm'",
    ),
    "kube-hostnetwork-ports": (
        _both(_pod(hostNetwork=True), _container(ports=[{"containerPort": 8000, "hostPort": 8000}])),
        _both(_pod(hostNetwork=True), _container(ports=[{"containerPort": 8000, "hostPort": 9000}])),
        "hostPort 9000 differs from containerPort 8000",
    ),
    "kube-claim-spec": (
        _pod(volumes=[_ephemeral("ReadWriteOncePod")]),
        _pod(volumes=[_ephemeral("ReadWriteOnce", "ReadWriteOncePod")]),
        "combines ReadWriteOncePod",
    ),
    "kube-env-vars": (
        _container(
            env=[{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s"}}}]
        ),
        _container(env=[{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]),
        "repeats 'A'",
    ),
    "kube-networkpolicy-peers": (
        _add(
            _policy({"namespaceSelector": {}}, {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}})
        ),
        _add(_policy({"namespaceSelector": {}, "ipBlock": {"cidr": "10.0.0.0/8"}})),
        "combines ipBlock with a selector",
    ),
    "router-args-reserved": (
        _container(
            command=["vllm-router"], args=["--host", "0.0.0.0", "--port", "8000", "--cache-threshold", "0.5"]
        ),
        _container(command=["vllm-router"], args=["--host", "0.0.0.0", "--port", "8000", "--port=9000"]),
        "overrides the chart's --port (8000 becomes 9000",
    ),
    "router-args-parse": (
        _container(
            command=["vllm-router"], args=["--host", "0.0.0.0", "--port", "8000", "--policy", "round_robin"]
        ),
        _container(command=["vllm-router"], args=["--host", "0.0.0.0", "--routing-logic", "session"]),
        "--routing-logic",
    ),
}


def _run(rule_id: str, mutation: Mutation) -> list[Any]:
    manifests = [copy.deepcopy(DEPLOYMENT)]
    mutation(manifests)
    ctx = ManifestsContext(manifests, "kv", {"kv": "restricted"})
    return catalogue.run_manifests(ctx, "env.yaml", only=[rule_id])


# Manifest rules whose cases need other objects than the standalone Deployment CASES mutates (another
# target's render, an Ingress and what it routes to): rule -> the module that holds its cases.
CASES_ELSEWHERE = {
    rule: Path(__file__).with_name("test_rules_hyperpod_pod.py")
    for rule in (
        "hyperpod-l2-volume-name",
        "hyperpod-l2-mount-path",
        "hyperpod-l2-patch-env",
        "hyperpod-worker-fields-delivered",
    )
}
# an Ingress's TLS is judged with the router's Service and pods behind it: cases beside the exposure rules
CASES_ELSEWHERE["router-ingress-tls"] = Path(__file__).with_name("test_rules_router_exposure.py")
# sysctls and the engines' metrics against the chart's autoscaler and alerts: modules of their own
CASES_ELSEWHERE["kube-sysctl-admitted"] = Path(__file__).with_name("test_rules_sysctl.py")
CASES_ELSEWHERE["engine-metrics-disabled"] = Path(__file__).with_name("test_rules_signal.py")
# a container's resources as the API server validates them, and hostPath dirs a non-root user writes
CASES_ELSEWHERE["kube-resources-admitted"] = Path(__file__).with_name("test_rules_resources.py")
CASES_ELSEWHERE["hostpath-writable-by-user"] = Path(__file__).with_name("test_rules_hostpath.py")


def test_every_manifest_rule_has_cases() -> None:
    manifest_rules = {r.id for r in catalogue.all_rules().values() if r.scope == "manifests"}
    assert manifest_rules == set(CASES) | set(CASES_ELSEWHERE)
    for rule, module in CASES_ELSEWHERE.items():
        assert f'"{rule}"' in module.read_text(), f"{module.name} holds no cases of {rule}"


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_passes(rule_id: str) -> None:
    assert _run(rule_id, CASES[rule_id][0]) == []


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_triggers(rule_id: str) -> None:
    findings = _run(rule_id, CASES[rule_id][1])
    assert findings and findings[0].rule == rule_id
    assert CASES[rule_id][2] in findings[0].message
    assert findings[0].subject.startswith(("Deployment/", "Role/", "NetworkPolicy/"))


def test_crosspod_rendered_catches_disagreement() -> None:
    def run(manifests: list[dict[str, Any]]) -> list[str]:
        return [
            f.message
            for f in catalogue.run_manifests(
                ManifestsContext(manifests, "kv"), "f", only=["crosspod-rendered"]
            )
        ]

    assert any("disagree on PYTHONHASHSEED" in m for m in run([_engine("a"), _engine("b", seed="1")]))
    assert any(
        "differs in" in m and "--dtype" in m for m in run([_engine("a"), _engine("b", dtype="bfloat16")])
    )
    cm = {"kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"lmcache.yaml": "chunk_size: 256\n"}}
    other = {"kind": "ConfigMap", "metadata": {"name": "y"}, "data": {"lmcache.yaml": "chunk_size: 512\n"}}
    assert any("LMCache configs disagree" in m for m in run([cm, other]))
    assert run([cm, copy.deepcopy(cm)]) == []

    # Each model's L2 namespace is its own: two configs in one directory share keys across models.
    def model_config(name: str, url: str) -> dict[str, Any]:
        return {
            "kind": "ConfigMap",
            "metadata": {"name": name},
            "data": {"lmcache.yaml": f"remote_url: {url}\n"},
        }

    apart = [
        model_config("a", "fs://localhost:0/l2/a.0123456789ab/"),
        model_config("b", "fs://localhost:0/l2/b.ba9876543210/"),
    ]
    assert run(apart) == []
    together = [model_config("a", "fs://localhost:0/l2/"), model_config("b", "fs://localhost:0/l2/")]
    assert any("share an L2 directory" in m for m in run(together))


@pytest.mark.parametrize(
    ("change", "level"),
    [
        ({}, "restricted"),
        ({"securityContext": {}}, "baseline"),  # may run as root, no seccomp profile
        ({"hostNetwork": True}, "privileged"),
    ],
)
def test_required_pod_security_level(change: dict[str, Any], level: str) -> None:
    spec = {**copy.deepcopy(DEPLOYMENT["spec"]["template"]["spec"]), **change}
    assert podsecurity.required_level(spec)[0] == level


def test_namespace_without_declared_level_is_not_judged() -> None:
    manifests = [copy.deepcopy(DEPLOYMENT)]
    manifests[0]["spec"]["template"]["spec"]["hostNetwork"] = True
    ctx = ManifestsContext(manifests, "kv", {})
    assert catalogue.run_manifests(ctx, "f", only=["policy-pod-security"]) == []


def test_readiness_is_required_only_behind_a_service() -> None:
    manifests = [copy.deepcopy(DEPLOYMENT)]
    template = manifests[0]["spec"]["template"]
    template["metadata"] = {"labels": {"app": "engine"}}
    template["spec"]["containers"][0].pop("readinessProbe")
    probes = ["policy-probes"]
    assert catalogue.run_manifests(ManifestsContext(manifests, "kv"), "f", only=probes) == []
    manifests.append(
        {"kind": "Service", "metadata": {"name": "engine"}, "spec": {"selector": {"app": "engine"}}}
    )
    [finding] = catalogue.run_manifests(ManifestsContext(manifests, "kv"), "f", only=probes)
    assert "lacks readinessProbe" in finding.message


def test_sidecars_without_ports_need_no_probes() -> None:
    manifests = [copy.deepcopy(DEPLOYMENT)]
    manifests[0]["spec"]["template"]["spec"]["containers"].append({"name": "registrar", "image": "r:v1"})
    assert catalogue.run_manifests(ManifestsContext(manifests, "kv"), "f", only=["policy-probes"]) == []


SEALED_TIER = {"type": "KvtierSealedFsTier", "module_path": "l2_native"}  # cache.l2.integrity's fs tier


def _native_engine(
    name: str,
    model: str,
    root: str,
    block: int = 256,
    algo: str = "sha256",
    tier: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An engine with vLLM's native offloading as the chart renders it (the relevant arguments only)."""
    engine = _engine(name)
    extra = {"spec_name": "TieringOffloadingSpec", "block_size": block, "cpu_bytes_to_use": 1 << 30}
    extra["secondary_tiers"] = [{**(tier or {"type": "fs"}), "root_dir": root}]
    transfer = {
        "kv_connector": "OffloadingConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": extra,
    }
    c = engine["spec"]["template"]["spec"]["containers"][0]
    c["args"] = ["serve", model, "--served-model-name", name, "--kv-transfer-config", json.dumps(transfer)]
    c["args"] += ["--prefix-caching-hash-algo", algo]
    return engine


def test_crosspod_rendered_reads_the_native_offloading_config() -> None:
    def run(manifests: list[dict[str, Any]]) -> list[str]:
        found = catalogue.run_manifests(ManifestsContext(manifests, "kv"), "f", only=["crosspod-rendered"])
        return [f.message for f in found]

    a = _native_engine("a", "m/a", "/l2/a.0123456789ab")
    b = _native_engine("b", "m/b", "/l2/b.ba9876543210")
    assert run([a, b]) == []
    chunks = run([a, _native_engine("b", "m/b", "/l2/b.ba9876543210", block=512)])
    assert any("disagree on the native offloading" in m and "512" in m for m in chunks)
    hashes = run([a, _native_engine("b", "m/b", "/l2/b.ba9876543210", algo="xxhash")])
    assert any("disagree on the native offloading" in m and "xxhash" in m for m in hashes)
    shared = run([a, _native_engine("b", "m/b", "/l2/a.0123456789ab")])
    assert any("share the fs tier directory /l2/a.0123456789ab" in m for m in shared)
    sealed = run([a, _native_engine("b", "m/b", "/l2/a.0123456789ab", tier=SEALED_TIER)])
    assert any("share the fs tier directory /l2/a.0123456789ab" in m for m in sealed)
    other = {
        "type": "KvtierSealedFsTier",
        "module_path": "elsewhere",
    }  # not the chart's: no fs directory known
    assert run([a, _native_engine("b", "m/b", "/l2/a.0123456789ab", tier=other)]) == []
    broken = _engine("c")
    broken["spec"]["template"]["spec"]["containers"][0]["args"] += ["--kv-transfer-config", "{oops"]
    assert any("--kv-transfer-config is not JSON" in m for m in run([broken]))


def test_engine_args_rendered_reads_hyperpod_endpoints_too() -> None:
    def endpoint(*args: str) -> dict[str, Any]:
        worker = {"args": ["/opt/ml/model", "--served-model-name", "m", "--port", "8000", *args]}
        return {"kind": "InferenceEndpointConfig", "metadata": {"name": "m"}, "spec": {"worker": worker}}

    def run(manifest: dict[str, Any]) -> list[str]:
        ctx = ManifestsContext([manifest], "kv")
        return [f.message for f in catalogue.run_manifests(ctx, "f", only=["engine-args-rendered"])]

    assert run(endpoint("--enforce-eager", "--max_num_seqs=4")) == []
    [message] = run(endpoint("--enforce-eager", "--po=9000"))  # a prefix vLLM expands to --port
    assert message == (
        "InferenceEndpointConfig/m spec.worker sets --port 2 times (args[3] '--port', args[6] '--po=9000'): "
        "vLLM runs with the last, '9000'"
    )
