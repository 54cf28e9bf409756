"""The HyperPod L2 patch on the real API server: install the bundle with the HyperPod environment, then write
Deployments the way the (closed-source) operator would and read back what the API server stored.

Stand-in: the operator itself cannot run here. Its CRDs are the real ones (fixture, installed by the
`hyperpod_crds` fixture); its Deployment is a hand-made object shaped as docs/hyperpod.md describes (name =
endpoint, pod label app=<endpoint>, vLLM container named like the Deployment next to sidecars, the
operator's LMCache L2 env), written while impersonating the operator's service account.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from kvtier import helm, hyperpod_fields, paths
from kvtier.cluster import lifecycle

CHART = paths.CHARTS / "kv-tiered-inference"
ENV = paths.VALUES / "hyperpod-g6e-4xlarge.yaml"
OPERATOR = "system:serviceaccount:hyperpod-inference-system:hyperpod-inference-operator-controller-manager"
ENDPOINT = "qwen2-7b"  # the model name in ENV, hence the endpoint's and the Deployment's name
MOUNT = "/mnt/curvine/l2cache"
PATCH_ENV = {
    "LMCACHE_REMOTE_URL": f"fs://localhost:0{MOUNT}/",
    "LMCACHE_REMOTE_SERDE": "naive",
    "LMCACHE_CHUNK_SIZE": "256",
    "PYTHONHASHSEED": "0",
}
POLICY_WAIT = 60.0  # seconds for the API server's policy informers to pick up a new policy


def operator_deployment(name: str, vllm_index: int = 0) -> dict[str, Any]:
    """A Deployment as the operator renders one for an endpoint with kvCacheSpec L2 = tieredstorage."""
    vllm = {
        "name": name,
        "image": "lmcache/vllm-openai:v0.3.7",
        "args": ["/opt/ml/model", "--max-model-len", "8192"],
        "ports": [{"name": "http", "containerPort": 8000}],
        "env": [
            {
                "name": "NODE_IP",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.hostIP"}},
            },
            {"name": "LMCACHE_USE_EXPERIMENTAL", "value": "True"},
            {"name": "LMCACHE_LOCAL_CPU", "value": "True"},
            {"name": "LMCACHE_REMOTE_URL", "value": "sagemaker-hyperpod://$(NODE_IP):9200"},
            {"name": "LMCACHE_EXTRA_CONFIG", "value": '{"tiered_storage": true}'},
        ],
        "volumeMounts": [{"name": "model-weights", "mountPath": "/opt/ml/model"}],
    }
    sidecars = [
        {
            "name": "proxy",
            "image": "example.invalid/proxy:1",
            "env": [{"name": "LMCACHE_EXTRA_CONFIG", "value": "x"}],
        },
        {"name": "otel-collector", "image": "example.invalid/otel:1"},
    ]
    containers = [*sidecars[:vllm_index], vllm, *sidecars[vllm_index:]]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": containers, "volumes": [{"name": "model-weights", "emptyDir": {}}]},
            },
        },
    }


class Cluster:
    """API access as the test's admin and as the operator's service account (impersonated)."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.admin = lifecycle.api_client(kubeconfig)
        self.operator = lifecycle.api_client(kubeconfig)
        self.operator.set_default_header("Impersonate-User", OPERATOR)

    def apps(self, as_operator: bool = True) -> client.AppsV1Api:
        return client.AppsV1Api(self.operator if as_operator else self.admin)

    def grant_operator(self, namespace: str) -> None:
        """What the real operator's ClusterRole gives it on Deployments, here for one namespace."""
        rbac = client.RbacAuthorizationV1Api(self.admin)
        rule = {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "create", "update"]}
        rbac.create_namespaced_role(namespace, {"metadata": {"name": "fake-operator"}, "rules": [rule]})
        subject = {"kind": "User", "name": OPERATOR, "apiGroup": "rbac.authorization.k8s.io"}
        role_ref = {"kind": "Role", "name": "fake-operator", "apiGroup": "rbac.authorization.k8s.io"}
        body = {"metadata": {"name": "fake-operator"}, "subjects": [subject], "roleRef": role_ref}
        rbac.create_namespaced_role_binding(namespace, body)


@pytest.fixture
def cluster(kube_cluster: Path, hyperpod_crds: list[str], need) -> Cluster:
    need((paths.TOOLS_BIN / "helm3").exists(), "pinned Helm 3 not built (make tools)")
    need((CHART / "Chart.yaml").exists(), "umbrella chart charts/kv-tiered-inference not present yet")
    assert hyperpod_fields.CRD_NAME in hyperpod_crds
    helm.build_dependencies(CHART)
    return Cluster(kube_cluster)


@pytest.fixture
def install(cluster: Cluster) -> Iterator[Callable[..., str]]:
    """`install(namespace, *helm_args)`: the bundle with the HyperPod environment; uninstalled afterwards
    (its admission policy is cluster-scoped and would outlive the namespace)."""
    releases: list[str] = []

    def run(namespace: str, *args: str) -> str:
        base = ["--kubeconfig", str(cluster.kubeconfig), "-n", namespace]
        result = helm.run(["install", "kv", str(CHART), *base, "-f", str(ENV), *args], timeout=240)
        assert result.returncode == 0, result.stdout + result.stderr
        releases.append(namespace)
        return namespace

    yield run
    for namespace in releases:
        helm.run(["uninstall", "kv", "--kubeconfig", str(cluster.kubeconfig), "-n", namespace], timeout=120)


def vllm_container(deployment: Any, name: str = ENDPOINT) -> Any:
    (container,) = [c for c in deployment.spec.template.spec.containers if c.name == name]
    return container


def env_of(container: Any) -> dict[str, Any]:
    names = [e.name for e in container.env or []]
    assert len(names) == len(set(names)), f"duplicate env names: {names}"
    return {e.name: e for e in container.env or []}


def is_patched(deployment: Any) -> bool:
    env = env_of(vllm_container(deployment))
    return "LMCACHE_REMOTE_URL" in env and env["LMCACHE_REMOTE_URL"].value == PATCH_ENV["LMCACHE_REMOTE_URL"]


def wait_for_policy(cluster: Cluster, namespace: str) -> None:
    """Dry-run the operator's create until the new policy is in force (its informers lag the install)."""
    deadline = time.monotonic() + POLICY_WAIT
    while True:
        probe = cluster.apps().create_namespaced_deployment(
            namespace, operator_deployment(ENDPOINT), dry_run="All"
        )
        if is_patched(probe):
            return
        assert time.monotonic() < deadline, f"the L2 patch was not in force after {POLICY_WAIT:.0f}s"
        time.sleep(1)


def assert_fully_patched(deployment: Any, claim: str = "kv-l2cache") -> None:
    spec = deployment.spec.template.spec
    volumes = [v for v in spec.volumes if v.name == "kvtier-l2cache"]
    assert len(volumes) == 1 and volumes[0].persistent_volume_claim.claim_name == claim
    assert {v.name for v in spec.volumes} == {"model-weights", "kvtier-l2cache"}
    vllm = vllm_container(deployment)
    mounts = {(m.name, m.mount_path) for m in vllm.volume_mounts}
    assert mounts == {("model-weights", "/opt/ml/model"), ("kvtier-l2cache", MOUNT)}
    env = env_of(vllm)
    assert {k: env[k].value for k in PATCH_ENV} == PATCH_ENV
    assert "LMCACHE_EXTRA_CONFIG" not in env, "the operator's HyperPod L2 settings must be gone"
    # Everything else the operator set is kept.
    assert env["NODE_IP"].value_from.field_ref.field_path == "status.hostIP"
    assert env["LMCACHE_LOCAL_CPU"].value == "True"
    # Sidecars are not the vLLM container: untouched, including their own env.
    proxy = vllm_container(deployment, "proxy")
    assert [(e.name, e.value) for e in proxy.env] == [("LMCACHE_EXTRA_CONFIG", "x")]
    assert not proxy.volume_mounts


def assert_untouched(deployment: Any, sent: dict[str, Any], name: str) -> None:
    spec = deployment.spec.template.spec
    assert [v.name for v in spec.volumes] == ["model-weights"]
    vllm = vllm_container(deployment, name)
    sent_vllm = next(c for c in sent["spec"]["template"]["spec"]["containers"] if c["name"] == name)
    assert [(e.name, e.value) for e in vllm.env] == [(e["name"], e.get("value")) for e in sent_vllm["env"]]
    assert [m.mount_path for m in vllm.volume_mounts] == ["/opt/ml/model"]


def test_endpoint_objects_accepted_strictly_by_the_operator_crd(cluster: Cluster, make_namespace) -> None:
    """Rendered endpoints against the real CRD on the API server, unknown fields refused."""
    namespace = make_namespace("hp-crd", enforce="privileged")
    args = ["template", "kv", str(CHART), "-n", namespace, "-f", str(ENV)]
    result = helm.run([*args, "--set", "hyperpod.patch.apiVersion=admissionregistration.k8s.io/v1"])
    assert result.returncode == 0, result.stderr
    endpoints = [d for d in yaml.safe_load_all(result.stdout) if d and d["kind"] == hyperpod_fields.KIND]
    assert endpoints
    custom = client.CustomObjectsApi(cluster.admin)
    plural = hyperpod_fields.CRD_NAME.split(".")[0]
    for endpoint in endpoints:
        custom.create_namespaced_custom_object(
            hyperpod_fields.GROUP, hyperpod_fields.VERSION, namespace, plural, endpoint,
            dry_run="All", field_validation="Strict",
        )  # fmt: skip
    broken = copy.deepcopy(endpoints[0])
    broken["spec"]["worker"]["volumeMounts"] = [{"name": "l2", "mountPath": MOUNT}]
    with pytest.raises(client.ApiException) as refused:
        custom.create_namespaced_custom_object(
            hyperpod_fields.GROUP, hyperpod_fields.VERSION, namespace, plural, broken,
            dry_run="All", field_validation="Strict",
        )  # fmt: skip
    assert 'unknown field "spec.worker.volumeMounts"' in refused.value.body


@pytest.mark.parametrize(
    "api_version",
    ["", "admissionregistration.k8s.io/v1beta1"],
    ids=["served-version-from-capabilities", "v1beta1-override"],
)
def test_operator_deployment_gets_the_full_patch_idempotently(
    cluster: Cluster, make_namespace, install, api_version: str
) -> None:
    namespace = install(
        make_namespace(f"hp-patch-{api_version.rsplit('/', 1)[-1] or 'auto'}", enforce="privileged"),
        "--set",
        f"hyperpod.patch.apiVersion={api_version}",
    )
    custom = client.CustomObjectsApi(cluster.admin)
    plural = hyperpod_fields.CRD_NAME.split(".")[0]
    stored = custom.get_namespaced_custom_object(
        hyperpod_fields.GROUP, hyperpod_fields.VERSION, namespace, plural, ENDPOINT
    )
    assert stored["spec"]["kvCacheSpec"]["enableL2Cache"] is True
    cluster.grant_operator(namespace)
    wait_for_policy(cluster, namespace)
    apps = cluster.apps()

    rendered = operator_deployment(ENDPOINT)
    created = apps.create_namespaced_deployment(namespace, copy.deepcopy(rendered))
    first = apps.read_namespaced_deployment(ENDPOINT, namespace)
    assert_fully_patched(first)
    assert created.spec.template.spec.to_dict() == first.spec.template.spec.to_dict()

    # The operator re-renders the same object (reconcile): the stored object does not change.
    again = copy.deepcopy(rendered)
    again["metadata"]["resourceVersion"] = first.metadata.resource_version
    apps.replace_namespaced_deployment(ENDPOINT, namespace, again)
    second = apps.read_namespaced_deployment(ENDPOINT, namespace)
    assert second.spec.to_dict() == first.spec.to_dict()
    assert second.metadata.generation == first.metadata.generation, "a no-op re-render must not roll pods"

    # Writing back the already-patched object is a no-op too (nothing appended twice).
    apps.replace_namespaced_deployment(ENDPOINT, namespace, second)
    third = apps.read_namespaced_deployment(ENDPOINT, namespace)
    assert third.spec.to_dict() == first.spec.to_dict()

    # A real re-render (e.g. a new image after a CR change) drops the patch; the API server puts it back.
    changed = copy.deepcopy(rendered)
    changed["metadata"]["resourceVersion"] = third.metadata.resource_version
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "lmcache/vllm-openai:v0.3.8"
    apps.replace_namespaced_deployment(ENDPOINT, namespace, changed)
    fourth = apps.read_namespaced_deployment(ENDPOINT, namespace)
    assert vllm_container(fourth).image == "lmcache/vllm-openai:v0.3.8"
    assert_fully_patched(fourth)


def test_vllm_container_found_by_name_not_position(cluster: Cluster, make_namespace, install) -> None:
    namespace = install(make_namespace("hp-patch-order", enforce="privileged"))
    cluster.grant_operator(namespace)
    wait_for_policy(cluster, namespace)
    apps = cluster.apps()
    apps.create_namespaced_deployment(namespace, operator_deployment(ENDPOINT, vllm_index=1))
    stored = apps.read_namespaced_deployment(ENDPOINT, namespace)
    assert stored.spec.template.spec.containers[1].name == ENDPOINT
    assert_fully_patched(stored)


def test_deployments_outside_the_match_are_unchanged(cluster: Cluster, make_namespace, install) -> None:
    namespace = install(make_namespace("hp-patch-scope", enforce="privileged"))
    elsewhere = make_namespace("hp-patch-elsewhere", enforce="privileged")
    for ns in (namespace, elsewhere):
        cluster.grant_operator(ns)
    wait_for_policy(cluster, namespace)

    # Not an endpoint of this release, though written by the operator with its usual shape.
    other = operator_deployment("other-model")
    cluster.apps().create_namespaced_deployment(namespace, copy.deepcopy(other))
    assert_untouched(
        cluster.apps().read_namespaced_deployment("other-model", namespace), other, "other-model"
    )

    # This release's endpoint name, but in another namespace.
    same_name = operator_deployment(ENDPOINT)
    cluster.apps().create_namespaced_deployment(elsewhere, copy.deepcopy(same_name))
    assert_untouched(cluster.apps().read_namespaced_deployment(ENDPOINT, elsewhere), same_name, ENDPOINT)

    # The right name and namespace but without the operator's pod label.
    unlabelled = operator_deployment(ENDPOINT)
    other_labels = {"app.kubernetes.io/name": ENDPOINT}
    unlabelled["spec"]["selector"]["matchLabels"] = other_labels
    unlabelled["spec"]["template"]["metadata"]["labels"] = other_labels
    probe = cluster.apps().create_namespaced_deployment(namespace, copy.deepcopy(unlabelled), dry_run="All")
    assert_untouched(probe, unlabelled, ENDPOINT)

    # The right object, written by someone other than the operator (here the test's admin).
    by_admin = cluster.apps(as_operator=False).create_namespaced_deployment(
        namespace, operator_deployment(ENDPOINT), dry_run="All"
    )
    assert_untouched(by_admin, operator_deployment(ENDPOINT), ENDPOINT)
