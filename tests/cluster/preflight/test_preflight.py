"""`kvtier preflight` against the real control plane: each cluster check once in a passing, once in a
failing set-up, and the command's output and exit codes (the HyperPod checks: test_preflight_hyperpod.py).

Set-ups are real objects in the API server (namespaces with Pod Security labels, a foreign CSIDriver, a
StatefulSet of a pretended earlier install, a service account with a narrow Role).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from preflight_support import RELEASE, STANDALONE, run_rule, variant

from harness import node_pool
from kvtier import exitcodes, preflight
from kvtier.cli import main
from kvtier.cluster.common.rest import Rest
from kvtier.cluster.kwok import nodes as fake_nodes
from kvtier.preflight import checks

# k8s-version ---------------------------------------------------------------------------------------------


def test_version_passes_on_the_pinned_server(env: Path, ns: str, kube_rest: Rest) -> None:
    assert run_rule(env, ns, kube_rest, "k8s-version").status == "pass"


def test_version_fails_below_the_supported_range(env: Path, ns: str, kube_rest: Rest, monkeypatch) -> None:
    monkeypatch.setattr(checks, "SUPPORTED_MINORS", (38, 40))  # the real server (1.37) is now too old
    result = run_rule(env, ns, kube_rest, "k8s-version")
    assert result.status == "fail" and "older than 1.38" in result.detail


# rbac ----------------------------------------------------------------------------------------------------


def test_rbac_passes_for_the_admin(env: Path, ns: str, kube_rest: Rest) -> None:
    result = run_rule(env, ns, kube_rest, "rbac")
    assert result.status == "pass", result.detail


@pytest.fixture
def narrow_user(kube_rest: Rest, kube_cluster: Path, ns: str, tmp_path: Path, wait_authorized) -> Rest:
    """A service account that may only create ConfigMaps in `ns`, as a client with its own token."""
    kube_rest.post(f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": "narrow"}})
    rule = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}
    kube_rest.post(
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
        {"metadata": {"name": "narrow"}, "rules": [rule]},
    )
    binding = {
        "metadata": {"name": "narrow"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "narrow"},
        "subjects": [{"kind": "ServiceAccount", "name": "narrow", "namespace": ns}],
    }
    kube_rest.post(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings", binding)
    wait_authorized(f"system:serviceaccount:{ns}:narrow", ns, "create", "configmaps")
    token = kube_rest.post(
        f"/api/v1/namespaces/{ns}/serviceaccounts/narrow/token", {"spec": {"expirationSeconds": 600}}
    )["status"]["token"]
    admin = yaml.safe_load(kube_cluster.read_text())
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "narrow",
        "clusters": admin["clusters"],
        "users": [{"name": "narrow", "user": {"token": token}}],
        "contexts": [
            {"name": "narrow", "context": {"cluster": admin["clusters"][0]["name"], "user": "narrow"}}
        ],
    }
    path = tmp_path / "narrow.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return Rest.from_kubeconfig(path)


def test_rbac_fails_for_a_user_who_may_only_create_configmaps(env: Path, ns: str, narrow_user: Rest) -> None:
    result = run_rule(env, ns, narrow_user, "rbac")
    assert result.status == "fail" and "denied" in result.detail
    assert "create configmaps" not in result.detail, "what the Role allows is not reported as denied"


# gpu-nodes -----------------------------------------------------------------------------------------------


def test_gpu_nodes_pass_for_two_g6e_replicas(env: Path, ns: str, kube_rest: Rest, tmp_path: Path) -> None:
    models = yaml.safe_load(env.read_text())["models"]
    models = [dict(models[0], replicas=2, gpusPerReplica=1, instanceType="ml.g6e.4xlarge")]
    result = run_rule(variant(tmp_path, env, "two", models=models), ns, kube_rest, "gpu-nodes")
    assert result.status == "pass", result.detail


def test_gpu_nodes_fail_when_replicas_exceed_the_gpus(
    env: Path, ns: str, kube_rest: Rest, tmp_path: Path
) -> None:
    models = yaml.safe_load(env.read_text())["models"]
    models = [dict(models[0], replicas=3, gpusPerReplica=1, instanceType="ml.g6e.4xlarge")]
    result = run_rule(variant(tmp_path, env, "three", models=models), ns, kube_rest, "gpu-nodes")
    assert result.status == "fail" and "needs 3" in result.detail


def test_gpu_nodes_fail_for_an_absent_instance_type(
    env: Path, ns: str, kube_rest: Rest, tmp_path: Path
) -> None:
    models = yaml.safe_load(env.read_text())["models"]
    models = [dict(models[0], instanceType="ml.p5.48xlarge")]
    result = run_rule(variant(tmp_path, env, "p5", models=models), ns, kube_rest, "gpu-nodes")
    assert result.status == "fail" and "ml.p5.48xlarge" in result.detail and "ml.g6e.4xlarge" in result.detail


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
DEDICATED = {"key": "dedicated", "operator": "Equal", "value": "inference", "effect": "NoSchedule"}
POOL = "kvtier.test/preflight-pool"


@pytest.fixture
def tainted_pool(kube_rest: Rest) -> Iterator[dict[str, str]]:
    """Two GPU nodes of this test only (a pool label), tainted for GPUs and for `dedicated=inference`."""
    run = node_pool.run_id()
    pool = {POOL: run}
    allocatable = {"cpu": "15890m", "memory": "127382Mi", "nvidia.com/gpu": "1", "pods": "110"}
    labels = {**pool, fake_nodes.FAKE_LABEL: "true", "node.kubernetes.io/instance-type": "ml.g6e.4xlarge"}
    taints = [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "inference", "effect": "NoSchedule"},
    ]
    bodies = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"preflight-{run}-{i}", "labels": labels},
            "spec": {"taints": taints},
            "status": {"capacity": allocatable, "allocatable": allocatable},
        }
        for i in range(2)
    ]
    with node_pool.added(kube_rest, bodies, f"{POOL}={run}"):
        yield pool


def test_gpu_nodes_hold_the_rendered_engines_to_the_taints(
    env: Path, ns: str, kube_rest: Rest, tmp_path: Path, tainted_pool: dict[str, str]
) -> None:
    """A tolerations list in values replaces the chart's: the nodes of the pool are no candidates, as
    kube-scheduler would filter them, until every taint is tolerated."""
    models = yaml.safe_load(env.read_text())["models"]
    models = [dict(models[0], replicas=2, gpusPerReplica=1, nodeSelector=tainted_pool)]
    one = variant(tmp_path, env, "gpu-only", models=models, **{"engine.tolerations": [GPU_TOLERATION]})
    result = run_rule(one, ns, kube_rest, "gpu-nodes")
    assert result.status == "fail", result.detail
    assert "dedicated=inference:NoSchedule not tolerated" in result.detail, result.detail
    tolerations = [GPU_TOLERATION, DEDICATED]
    both = variant(tmp_path, env, "both", models=models, **{"engine.tolerations": tolerations})
    result = run_rule(both, ns, kube_rest, "gpu-nodes")
    assert result.status == "pass", result.detail


def test_gpu_nodes_say_when_they_judged_by_labels_only(
    env: Path, ns: str, kube_rest: Rest, tmp_path: Path, tainted_pool: dict[str, str]
) -> None:
    """A selector value YAML reads as a number (`pool: 12e3`, unquoted) fails the chart's schema: with no
    rendered pods to hold to the taints, the result says it matched labels only, and why."""
    models = yaml.safe_load(env.read_text())["models"]
    models = [dict(models[0], nodeSelector={POOL: 12e3})]
    result = run_rule(variant(tmp_path, env, "number", models=models), ns, kube_rest, "gpu-nodes")
    assert result.status == "fail", result.detail
    assert "judged by labels only, as the install did not render (" in result.detail, result.detail


# nvme-nodes ----------------------------------------------------------------------------------------------


def test_nvme_nodes_pass_when_the_selector_finds_the_gpu_nodes(env, ns, kube_rest, tmp_path) -> None:
    selector = {"node.kubernetes.io/instance-type": "ml.g6e.4xlarge"}
    file = variant(
        tmp_path, env, "nvme", **{"curvine.enabled": True, "curvine.worker.nodeSelector": selector}
    )
    result = run_rule(file, ns, kube_rest, "nvme-nodes")
    assert result.status == "pass", result.detail


def test_nvme_nodes_say_when_they_judged_by_labels_only(env, ns, kube_rest, tmp_path) -> None:
    selector = {"node.kubernetes.io/instance-type": "ml.g6e.4xlarge"}
    models = [dict(yaml.safe_load(env.read_text())["models"][0], nodeSelector={POOL: 12e3})]  # no render
    overrides = {"curvine.enabled": True, "curvine.worker.nodeSelector": selector, "models": models}
    result = run_rule(variant(tmp_path, env, "nvme-number", **overrides), ns, kube_rest, "nvme-nodes")
    assert result.status == "pass", result.detail
    assert "(judged by labels only, as the install did not render (" in result.detail, result.detail


def test_nvme_nodes_fail_when_no_node_matches(env, ns, kube_rest, tmp_path) -> None:
    selector = {"kvtier.io/no-such-disk": "true"}
    file = variant(
        tmp_path, env, "none", **{"curvine.enabled": True, "curvine.worker.nodeSelector": selector}
    )
    result = run_rule(file, ns, kube_rest, "nvme-nodes")
    assert result.status == "fail" and "no-such-disk" in result.detail


# storage-conflicts -------------------------------------------------------------------------------------


@pytest.fixture
def foreign_csidriver(kube_rest: Rest) -> Iterator[None]:
    """A CSIDriver `curvine` that some other installation owns (another Helm release)."""
    body = {
        "metadata": {
            "name": "curvine",
            "annotations": {
                "meta.helm.sh/release-name": "other",
                "meta.helm.sh/release-namespace": "elsewhere",
            },
        },
        "spec": {"attachRequired": False},
    }
    kube_rest.post("/apis/storage.k8s.io/v1/csidrivers", body)
    yield
    kube_rest.delete("/apis/storage.k8s.io/v1/csidrivers/curvine")


def test_storage_passes_on_a_clean_cluster(env: Path, ns: str, kube_rest: Rest) -> None:
    assert kube_rest.find("/apis/storage.k8s.io/v1/csidrivers/curvine") is None
    result = run_rule(env, ns, kube_rest, "storage-conflicts")
    assert result.status == "pass", result.detail


def test_storage_fails_on_another_releases_csidriver(env, ns, kube_rest, foreign_csidriver) -> None:
    result = run_rule(env, ns, kube_rest, "storage-conflicts")
    assert result.status == "fail" and "elsewhere/other" in result.detail


# pod-security --------------------------------------------------------------------------------------------


def test_pod_security_passes_in_a_privileged_namespace(env: Path, ns: str, kube_rest: Rest) -> None:
    assert run_rule(env, ns, kube_rest, "pod-security").status == "pass"


def test_pod_security_fails_in_a_restricted_namespace(env: Path, make_namespace, kube_rest: Rest) -> None:
    restricted = make_namespace("preflight-restricted", enforce="restricted")
    result = run_rule(env, restricted, kube_rest, "pod-security")
    assert result.status == "fail" and "restricted" in result.detail


# release-immutable ---------------------------------------------------------------------------------------


def test_immutable_passes_without_an_earlier_install(env: Path, ns: str, kube_rest: Rest) -> None:
    assert run_rule(env, ns, kube_rest, "release-immutable").status == "pass"


def test_immutable_fails_when_the_master_count_would_change(env, ns, kube_rest, tmp_path) -> None:
    labels = {"app.kubernetes.io/instance": RELEASE, "app.kubernetes.io/component": "master", "app": "pf"}
    sts = {  # what an earlier install with one master left (Raft membership is fixed after install)
        "metadata": {"name": f"{RELEASE}-curvine-master", "labels": labels},
        "spec": {
            "replicas": 1,
            "serviceName": "m",
            "selector": {"matchLabels": {"app": "pf"}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "m", "image": "registry.invalid/m:1"}]},
            },
        },
    }
    kube_rest.post(f"/apis/apps/v1/namespaces/{ns}/statefulsets", sts)
    file = variant(tmp_path, env, "three", **{"curvine.enabled": True, "curvine.master.replicas": 3})
    result = run_rule(file, ns, kube_rest, "release-immutable")
    assert result.status == "fail" and "runs 1 masters" in result.detail


def test_standalone_skips_the_hyperpod_checks(env: Path, ns: str, kube_rest: Rest, need) -> None:
    need(STANDALONE is not None, "no standalone environment in values/")
    results = preflight.run(env, RELEASE, ns, kube_rest)
    assert {r.rule for r in results if r.status == "skip"} >= {
        "hyperpod-crds",
        "cert-manager",
        "admission-policy",
    }


# the command ---------------------------------------------------------------------------------------------


def test_cli_json_and_exit_codes(env: Path, make_namespace, kube_cluster: Path, capsys) -> None:
    restricted = make_namespace("preflight-cli", enforce="restricted")
    code = main(["preflight", str(env), "--kubeconfig", str(kube_cluster), "-n", restricted, "-o", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == exitcodes.FINDINGS
    failed = {c["id"] for c in report["checks"] if c["status"] == "fail"}
    assert "pod-security" in failed and all(c["remedy"] for c in report["checks"] if c["status"] == "fail")


def test_cli_unreachable_cluster_is_a_usage_error(env: Path, tmp_path: Path, capsys) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "x",
        "clusters": [{"name": "x", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "x", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    assert main(["preflight", str(env), "--kubeconfig", str(path)]) == exitcodes.USAGE
    assert "cannot reach the API server" in capsys.readouterr().err
