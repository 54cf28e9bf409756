"""`kvtier preflight`'s HyperPod checks against the real control plane, each passing and failing.

The operator's CRDs are those derived from AWS's SDK (tests/conftest.py `hyperpod_crd_dir`). cert-manager
and HyperPod's tiered-storage DaemonSet cannot run here: stand-ins of the same names (a CRD, a
Deployment/DaemonSet whose pods KWOK fakes) take their place, and are named so below.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from preflight_support import CRDS, run_rule, variant

from kvtier.cluster.common import hyperpod
from kvtier.cluster.common.rest import ApiException, Rest

# HyperPod: CRDs, cert-manager, tiered storage, admission policy -------------------------------------------


def test_hyperpod_crds_pass_when_installed(hp_env: Path, ns: str, kube_rest: Rest) -> None:
    result = run_rule(hp_env, ns, kube_rest, "hyperpod-crds")
    assert result.status == "pass", result.detail


@pytest.fixture
def without_hyperpod_crds(
    kube_rest: Rest, hyperpod_crds: list[str], hyperpod_crd_dir: Path
) -> Iterator[None]:
    for name in hyperpod_crds:
        kube_rest.delete(f"{CRDS}/{name}")
    deadline = time.monotonic() + 60
    while any(kube_rest.find(f"{CRDS}/{n}") for n in hyperpod_crds) and time.monotonic() < deadline:
        time.sleep(0.5)
    yield
    hyperpod.install_crds(kube_rest, hyperpod_crd_dir)


def test_hyperpod_crds_fail_when_missing(
    hp_env: Path, ns: str, kube_rest: Rest, without_hyperpod_crds
) -> None:
    result = run_rule(hp_env, ns, kube_rest, "hyperpod-crds")
    assert result.status == "fail" and "not installed" in result.detail


def test_cert_manager_fails_when_absent(hp_env: Path, ns: str, kube_rest: Rest) -> None:
    assert kube_rest.find(f"{CRDS}/certificates.cert-manager.io") is None
    assert run_rule(hp_env, ns, kube_rest, "cert-manager").status == "fail"


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
    result = run_rule(hp_env, ns, kube_rest, "cert-manager")
    assert result.status == "pass", result.detail


@pytest.fixture
def tiered_env(hp_env: Path, tmp_path: Path) -> Path:
    return variant(tmp_path, hp_env, "tiered", **{"hyperpod.l2CachePlaceholder.backend": "tieredstorage"})


def test_tiered_storage_fails_when_used_without_its_daemonset(tiered_env, ns, kube_rest) -> None:
    result = run_rule(tiered_env, ns, kube_rest, "tiered-storage")
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
            result = run_rule(tiered_env, ns, kube_rest, "tiered-storage")
            if result.status == "pass" or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert result.status == "pass", result.detail
    finally:
        kube_rest.delete("/api/v1/namespaces/aws-hyperpod")


def test_admission_policy_passes_where_served(hp_env: Path, ns: str, kube_rest: Rest) -> None:
    result = run_rule(hp_env, ns, kube_rest, "admission-policy")
    assert result.status == "pass" and "v1" in result.detail


NO_MAP = (
    "admissionregistration.k8s.io/v1/mutatingadmissionpolicies=false,"
    "admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings=false,"
    "admissionregistration.k8s.io/v1beta1=false"
)


@pytest.fixture(scope="module")
def cluster_without_map(kube_cluster_info) -> Iterator[Rest]:
    """A second real control plane whose API server does not serve MutatingAdmissionPolicy (as 1.34/1.35
    clusters without the runtime-config switch, i.e. most managed ones)."""
    from kvtier.cluster.kwok import lifecycle

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
    result = run_rule(hp_env, "default", cluster_without_map, "admission-policy")
    assert result.status == "fail" and "not served" in result.detail


@pytest.fixture
def operator_36_crds(kube_rest: Rest, hyperpod_crds: list[str], hyperpod_crd_dir: Path, tmp_path: Path):
    """The CRDs as an operator 3.6 serves them (no tolerations, no lmcache); 3.7's put back afterwards."""
    from kvtier.upstream import hyperpod_crd

    hyperpod.install_crds(kube_rest, hyperpod_crd.write(tmp_path / "crds-3.6", "3.6")[0].parent)
    yield
    hyperpod.install_crds(kube_rest, hyperpod_crd_dir)


def test_hyperpod_crds_name_the_operator_version_a_field_needs(
    hp_env: Path, ns: str, kube_rest: Rest, tmp_path: Path, operator_36_crds
) -> None:
    """Values for operator 3.7 (MultiProcess) against a 3.6 CRD: refused, and the fix says which version."""
    mp = variant(tmp_path, hp_env, "hp-mp", **{"hyperpod.lmcache.mode": "MultiProcess"})
    result = run_rule(mp, ns, kube_rest, "hyperpod-crds")
    assert result.status == "fail", result.detail
    assert "spec.lmcache" in result.detail and "older than 3.7" in result.detail
    # The InProcess environment renders nothing a 3.6 operator lacks.
    assert run_rule(hp_env, ns, kube_rest, "hyperpod-crds").status == "pass"
