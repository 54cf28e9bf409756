"""`kvtier preflight` against the real control plane: every check once in a passing, once in a failing set-up.

Set-ups are real objects in the API server (namespaces with Pod Security labels, a foreign CSIDriver, a
StatefulSet of a pretended earlier install, a service account with a narrow Role, the HyperPod CRDs).
cert-manager and HyperPod's tiered-storage DaemonSet cannot run here: stand-ins of the same names
(a CRD, a Deployment/DaemonSet whose pods KWOK fakes) take their place, and are named so below.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvtier import exitcodes, paths, preflight
from kvtier.cli import main
from kvtier.cluster import hyperpod
from kvtier.cluster.rest import ApiException, Rest
from kvtier.preflight import checks
from kvtier.preflight.model import Result

ENVS = {p: yaml.safe_load(p.read_text()) for p in sorted(paths.VALUES.glob("*.yaml"))}
HYPERPOD = next((p for p, v in ENVS.items() if v.get("target") == "hyperpod"), None)
STANDALONE = next((p for p, v in ENVS.items() if v.get("target", "standalone") == "standalone"), None)
RELEASE = "pf"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def _result(results: list[Result], rule: str) -> Result:
    return next(r for r in results if r.rule == rule)


def _variant(tmp_path: Path, base: Path, name: str, **overrides: Any) -> Path:
    """A copy of an environment with top-level keys replaced (lists are replaced whole, as in Helm)."""
    data = yaml.safe_load(base.read_text())
    for key, value in overrides.items():
        node = data
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    out = tmp_path / f"{name}.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


@pytest.fixture
def env(need, request: pytest.FixtureRequest) -> Path:
    """The standalone environment, else the HyperPod one (with the operator's CRDs it needs to render)."""
    need(HYPERPOD is not None or STANDALONE is not None, "no environment in values/")
    if STANDALONE is None:
        request.getfixturevalue("hyperpod_crds")
    return STANDALONE or HYPERPOD  # type: ignore[return-value]


@pytest.fixture
def hp_env(need, hyperpod_crds) -> Path:
    need(HYPERPOD is not None, "no hyperpod environment in values/")
    return HYPERPOD  # type: ignore[return-value]


@pytest.fixture
def ns(make_namespace) -> str:
    return make_namespace("preflight", enforce="privileged")


def _run(env: Path, ns: str, rest: Rest, rule: str) -> Result:
    return _result(preflight.run(env, RELEASE, ns, rest), rule)


# k8s-version ---------------------------------------------------------------------------------------------


def test_version_passes_on_the_pinned_server(env: Path, ns: str, kube_rest: Rest) -> None:
    assert _run(env, ns, kube_rest, "k8s-version").status == "pass"


def test_version_fails_below_the_supported_range(env: Path, ns: str, kube_rest: Rest, monkeypatch) -> None:
    monkeypatch.setattr(checks, "SUPPORTED_MINORS", (38, 40))  # the real server (1.37) is now too old
    result = _run(env, ns, kube_rest, "k8s-version")
    assert result.status == "fail" and "older than 1.38" in result.detail


# rbac ----------------------------------------------------------------------------------------------------


def test_rbac_passes_for_the_admin(env: Path, ns: str, kube_rest: Rest) -> None:
    result = _run(env, ns, kube_rest, "rbac")
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
    result = _run(env, ns, narrow_user, "rbac")
    assert result.status == "fail" and "denied" in result.detail
    assert "create configmaps" not in result.detail, "what the Role allows is not reported as denied"


# gpu-nodes -----------------------------------------------------------------------------------------------


def test_gpu_nodes_pass_for_two_g6e_replicas(env: Path, ns: str, kube_rest: Rest, tmp_path: Path) -> None:
    models = yaml.safe_load(env.read_text())["models"]
    models = [dict(models[0], replicas=2, gpusPerReplica=1, instanceType="ml.g6e.4xlarge")]
    result = _run(_variant(tmp_path, env, "two", models=models), ns, kube_rest, "gpu-nodes")
    assert result.status == "pass", result.detail


def test_gpu_nodes_fail_when_replicas_exceed_the_gpus(
    env: Path, ns: str, kube_rest: Rest, tmp_path: Path
) -> None:
    models = yaml.safe_load(env.read_text())["models"]
    models = [dict(models[0], replicas=3, gpusPerReplica=1, instanceType="ml.g6e.4xlarge")]
    result = _run(_variant(tmp_path, env, "three", models=models), ns, kube_rest, "gpu-nodes")
    assert result.status == "fail" and "needs 3" in result.detail


def test_gpu_nodes_fail_for_an_absent_instance_type(
    env: Path, ns: str, kube_rest: Rest, tmp_path: Path
) -> None:
    models = yaml.safe_load(env.read_text())["models"]
    models = [dict(models[0], instanceType="ml.p5.48xlarge")]
    result = _run(_variant(tmp_path, env, "p5", models=models), ns, kube_rest, "gpu-nodes")
    assert result.status == "fail" and "ml.p5.48xlarge" in result.detail and "ml.g6e.4xlarge" in result.detail


# nvme-nodes ----------------------------------------------------------------------------------------------


def test_nvme_nodes_pass_when_the_selector_finds_the_gpu_nodes(env, ns, kube_rest, tmp_path) -> None:
    selector = {"node.kubernetes.io/instance-type": "ml.g6e.4xlarge"}
    file = _variant(
        tmp_path, env, "nvme", **{"curvine.enabled": True, "curvine.worker.nodeSelector": selector}
    )
    result = _run(file, ns, kube_rest, "nvme-nodes")
    assert result.status == "pass", result.detail


def test_nvme_nodes_fail_when_no_node_matches(env, ns, kube_rest, tmp_path) -> None:
    selector = {"kvtier.io/no-such-disk": "true"}
    file = _variant(
        tmp_path, env, "none", **{"curvine.enabled": True, "curvine.worker.nodeSelector": selector}
    )
    result = _run(file, ns, kube_rest, "nvme-nodes")
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
    result = _run(env, ns, kube_rest, "storage-conflicts")
    assert result.status == "pass", result.detail


def test_storage_fails_on_another_releases_csidriver(env, ns, kube_rest, foreign_csidriver) -> None:
    result = _run(env, ns, kube_rest, "storage-conflicts")
    assert result.status == "fail" and "elsewhere/other" in result.detail


# pod-security --------------------------------------------------------------------------------------------


def test_pod_security_passes_in_a_privileged_namespace(env: Path, ns: str, kube_rest: Rest) -> None:
    assert _run(env, ns, kube_rest, "pod-security").status == "pass"


def test_pod_security_fails_in_a_restricted_namespace(env: Path, make_namespace, kube_rest: Rest) -> None:
    restricted = make_namespace("preflight-restricted", enforce="restricted")
    result = _run(env, restricted, kube_rest, "pod-security")
    assert result.status == "fail" and "restricted" in result.detail


# release-immutable ---------------------------------------------------------------------------------------


def test_immutable_passes_without_an_earlier_install(env: Path, ns: str, kube_rest: Rest) -> None:
    assert _run(env, ns, kube_rest, "release-immutable").status == "pass"


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
    file = _variant(tmp_path, env, "three", **{"curvine.enabled": True, "curvine.master.replicas": 3})
    result = _run(file, ns, kube_rest, "release-immutable")
    assert result.status == "fail" and "runs 1 masters" in result.detail


# HyperPod: CRDs, cert-manager, tiered storage, admission policy -------------------------------------------


def test_hyperpod_crds_pass_when_installed(hp_env: Path, ns: str, kube_rest: Rest) -> None:
    result = _run(hp_env, ns, kube_rest, "hyperpod-crds")
    assert result.status == "pass", result.detail


@pytest.fixture
def without_hyperpod_crds(kube_rest: Rest, hyperpod_crds: list[str]) -> Iterator[None]:
    for name in hyperpod_crds:
        kube_rest.delete(f"{CRDS}/{name}")
    deadline = time.monotonic() + 60
    while any(kube_rest.find(f"{CRDS}/{n}") for n in hyperpod_crds) and time.monotonic() < deadline:
        time.sleep(0.5)
    yield
    hyperpod.install_crds(kube_rest)


def test_hyperpod_crds_fail_when_missing(
    hp_env: Path, ns: str, kube_rest: Rest, without_hyperpod_crds
) -> None:
    result = _run(hp_env, ns, kube_rest, "hyperpod-crds")
    assert result.status == "fail" and "not installed" in result.detail


def test_cert_manager_fails_when_absent(hp_env: Path, ns: str, kube_rest: Rest) -> None:
    assert kube_rest.find(f"{CRDS}/certificates.cert-manager.io") is None
    assert _run(hp_env, ns, kube_rest, "cert-manager").status == "fail"


@pytest.fixture
def cert_manager_stand_in(kube_rest: Rest, make_namespace) -> Iterator[None]:
    """Stand-in: a CRD named like cert-manager's Certificate and a Deployment labelled like its controller."""
    crd = {
        "metadata": {"name": "certificates.cert-manager.io"},
        "spec": {
            "group": "cert-manager.io",
            "scope": "Namespaced",
            "names": {"kind": "Certificate", "plural": "certificates", "singular": "certificate"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }
    kube_rest.post(CRDS, crd)
    namespace = make_namespace("cert-manager-stand-in")
    labels = {"app.kubernetes.io/name": "cert-manager"}
    deployment = {
        "metadata": {"name": "cert-manager", "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "registry.invalid/stand-in:1"}]},
            },
        },
    }
    kube_rest.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment)
    yield
    kube_rest.delete(f"{CRDS}/certificates.cert-manager.io")


def test_cert_manager_passes_with_its_crd_and_controller(
    hp_env, ns, kube_rest, cert_manager_stand_in
) -> None:
    result = _run(hp_env, ns, kube_rest, "cert-manager")
    assert result.status == "pass", result.detail


@pytest.fixture
def tiered_env(hp_env: Path, tmp_path: Path) -> Path:
    return _variant(tmp_path, hp_env, "tiered", **{"hyperpod.l2CachePlaceholder.backend": "tieredstorage"})


def test_tiered_storage_fails_when_used_without_its_daemonset(tiered_env, ns, kube_rest) -> None:
    result = _run(tiered_env, ns, kube_rest, "tiered-storage")
    assert result.status == "fail" and "aws-hyperpod/ai-toolkit" in result.detail, result.detail


def test_tiered_storage_passes_when_its_daemonset_is_ready(tiered_env, ns, kube_rest) -> None:
    try:  # stand-in DaemonSet of the same name; KWOK makes its pods Running on every node
        kube_rest.post("/api/v1/namespaces", {"metadata": {"name": "aws-hyperpod"}})
    except ApiException as error:
        assert error.status == 409
    labels = {"app": "ai-toolkit"}
    ds = {
        "metadata": {"name": "ai-toolkit"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "t", "image": "registry.invalid/t:1"}]},
            },
        },
    }
    kube_rest.post("/apis/apps/v1/namespaces/aws-hyperpod/daemonsets", ds)
    try:
        deadline = time.monotonic() + 60
        while True:
            result = _run(tiered_env, ns, kube_rest, "tiered-storage")
            if result.status == "pass" or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert result.status == "pass", result.detail
    finally:
        kube_rest.delete("/api/v1/namespaces/aws-hyperpod")


def test_admission_policy_passes_where_served(hp_env: Path, ns: str, kube_rest: Rest) -> None:
    result = _run(hp_env, ns, kube_rest, "admission-policy")
    assert result.status == "pass" and "v1" in result.detail


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
    code = main(["preflight", str(env), "--kubeconfig", str(kube_cluster), "-n", restricted, "--json"])
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


NO_MAP = (
    "admissionregistration.k8s.io/v1/mutatingadmissionpolicies=false,"
    "admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings=false,"
    "admissionregistration.k8s.io/v1beta1=false"
)


@pytest.fixture(scope="module")
def cluster_without_map(kube_cluster_info) -> Iterator[Rest]:
    """A second real control plane whose API server does not serve MutatingAdmissionPolicy (as 1.34/1.35
    clusters without the runtime-config switch, i.e. most managed ones)."""
    from kvtier.cluster import lifecycle

    name = f"{kube_cluster_info.name}-nomap"
    # The GA admission plugin needs its API: switch both off, as a 1.34/1.35 cluster has them by default.
    info = lifecycle.up(
        name, timeout=300, runtime_config_extra=NO_MAP, feature_gates_extra="MutatingAdmissionPolicy=false"
    )
    try:
        yield Rest.from_kubeconfig(info.kubeconfig)
    finally:
        if info.started:
            lifecycle.down(name)


def test_admission_policy_fails_where_not_served(hp_env: Path, cluster_without_map: Rest) -> None:
    served = {
        r["kind"] for r in cluster_without_map.get("/apis/admissionregistration.k8s.io/v1")["resources"]
    }
    assert "MutatingAdmissionPolicy" not in served and "ValidatingAdmissionPolicy" in served
    result = _run(hp_env, "default", cluster_without_map, "admission-policy")
    assert result.status == "fail" and "not served" in result.detail
