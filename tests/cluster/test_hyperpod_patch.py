"""The HyperPod L2 patch on the real API server: install the bundle with the HyperPod environment, then write
Deployments the way the (closed-source) operator would and read back what the API server stored.

Stand-in: the operator itself cannot run here. Its CRDs are derived from AWS's SDK for the newest operator
(the `hyperpod_crds` fixture; no file from outside the repository); its Deployment is a hand-made object
shaped as docs/hyperpod.md describes (name = endpoint, pod label app=<endpoint>, vLLM container named like
the Deployment next to sidecars, the operator's LMCache L2 env; in MultiProcess mode that env sits in an
LMCache server sidecar), written while impersonating the operator's service account.
"""

from __future__ import annotations

import copy
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import config

from kvtier import helm, paths
from kvtier.cluster.common.rest import ApiException, Rest
from kvtier.upstream import hyperpod_fields

CHART = paths.CHARTS / "kv-tiered-inference"
ENV = paths.VALUES / "hyperpod-g6e-4xlarge.yaml"
OPERATOR = "system:serviceaccount:hyperpod-inference-system:hyperpod-inference-operator-controller-manager"
ENDPOINT = "qwen2-7b"  # the model name in ENV, hence the endpoint's and the Deployment's name
MOUNT = "/mnt/curvine/l2cache"
PATCH_ENV = {  # alike for every endpoint; the L2 variable names each endpoint's own L2 namespace
    "LMCACHE_REMOTE_SERDE": "naive",
    "LMCACHE_CHUNK_SIZE": "256",
    "PYTHONHASHSEED": "0",
}
# InProcess with cache.l2.integrity (the default): LMCache loads the chart's L2 plugin by name, Python
# imports it from the podscripts ConfigMap, and the endpoint's directory is the plugin's base_path.
PLUGIN_ENV = {"LMCACHE_REMOTE_STORAGE_PLUGINS": "kvtier_l2", "PYTHONPATH": "/opt/kvtier/podscripts"}
PLUGIN = "remote_storage_plugin.kvtier_l2."
PODSCRIPTS = ("kvtier-podscripts", "/opt/kvtier/podscripts")  # the patch's volume and mount path
POLICY_WAIT = 60.0  # seconds for the API server's policy informers to pick up a new policy
# The test cluster is shared with other suites: leave out Curvine's one-per-cluster CSIDriver `curvine`
# (the patch does not involve the CSI driver; the StorageClass and the L2 claim stay).
SHARED_CLUSTER = ("--set", "curvine.csi.enabled=false")


SIDECAR = "lmcache-server"  # hyperpod.lmcache.serverContainerName's default
MULTIPROCESS = ("--set", "hyperpod.lmcache.mode=MultiProcess")
TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
SERVER_ARGS = ["--port", "6555"]  # what the operator may pass its LMCache server (unknown: closed source)


def l2_dir_of(deployment: dict[str, Any], cache: str) -> str | None:
    """The endpoint's L2 directory if the patch set one: the L2 mount's `<endpoint>.<12 hex>`, from the L2
    plugin's base_path in LMCACHE_EXTRA_CONFIG, else from LMCACHE_REMOTE_URL."""
    env = env_of(container(deployment, cache))
    extra = env.get("LMCACHE_EXTRA_CONFIG", {}).get("value", "")
    try:
        path = str(json.loads(extra).get(f"{PLUGIN}base_path", "")) if extra.startswith("{") else ""
    except json.JSONDecodeError:
        path = ""
    url = env.get("LMCACHE_REMOTE_URL", {}).get("value", "")
    if not path and url.startswith("fs://localhost:0") and url.endswith("/"):
        path = url.removeprefix("fs://localhost:0").removesuffix("/")
    name = re.escape(deployment["metadata"]["name"])
    return path if re.fullmatch(rf"{MOUNT}/{name}\.[0-9a-f]{{12}}", path) else None


def l2_adapter_for(path: str, sealed: bool = True) -> str:
    """The --l2-adapter JSON on the directory `path`, as the chart has it (keys sorted, compact): the bundle's
    sealed adapter through LMCache's plugin type, or (integrity off) LMCache's fs adapter."""
    if sealed:
        adapter = {
            "adapter_params": {"base_path": path},
            "class_name": "KvtierSealedFSL2Adapter",
            "module_path": "l2_adapter",
            "type": "plugin",
        }
        return json.dumps(adapter, separators=(",", ":"))
    return json.dumps({"base_path": path, "type": "fs"}, separators=(",", ":"))


def operator_deployment(name: str, vllm_index: int = 0, multiprocess: bool = False) -> dict[str, Any]:
    """A Deployment as the operator renders one for an endpoint with kvCacheSpec L2 = tieredstorage; with
    `multiprocess`, LMCache's L1/L2 settings sit in a co-located LMCache server sidecar instead of vLLM."""
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
    if multiprocess:
        server = {
            "name": SIDECAR,
            "image": "example.invalid/lmcache-server:1",
            "args": SERVER_ARGS,
            "env": vllm["env"],
            "volumeMounts": [{"name": "model-weights", "mountPath": "/opt/ml/model"}],
        }
        vllm = {**vllm, "env": [{"name": "LMCACHE_MP_SERVER", "value": "tcp://localhost:6555"}]}
        sidecars.insert(0, server)
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
    """Plain-JSON API access as the test's admin and as the operator's service account (impersonated)."""

    def __init__(self, kubeconfig: Path, admin: Rest, wait_authorized: Callable[..., None]) -> None:
        self.kubeconfig = kubeconfig
        self.admin = admin
        self.wait_authorized = wait_authorized
        impersonating = config.new_client_from_config(config_file=str(kubeconfig))
        impersonating.set_default_header("Impersonate-User", OPERATOR)
        self.operator = Rest(impersonating)

    def grant_operator(self, namespace: str) -> None:
        """What the real operator's ClusterRole gives it on Deployments, here for one namespace."""
        rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
        rule = {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "create", "update"]}
        self.admin.post(f"{rbac}/roles", {"metadata": {"name": "fake-operator"}, "rules": [rule]})
        subject = {"kind": "User", "name": OPERATOR, "apiGroup": "rbac.authorization.k8s.io"}
        role_ref = {"kind": "Role", "name": "fake-operator", "apiGroup": "rbac.authorization.k8s.io"}
        body = {"metadata": {"name": "fake-operator"}, "subjects": [subject], "roleRef": role_ref}
        self.admin.post(f"{rbac}/rolebindings", body)
        self.wait_authorized(OPERATOR, namespace, "create", "deployments", "apps")

    def create(self, namespace: str, body: dict[str, Any], as_operator: bool = True, dry_run: bool = False):
        """POST a Deployment; returns what the API server stored (or would store, for a dry run)."""
        api = self.operator if as_operator else self.admin
        query = {"dryRun": "All"} if dry_run else None
        path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
        return api.request("POST", path, copy.deepcopy(body), query=query)

    def replace(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """A re-render as a controller-runtime operator writes it: the current object with its spec (and
        labels) set to the rendering, PUT at the current resourceVersion. The Deployment controller keeps
        writing status, so a conflict is retried on the fresh object."""
        name = body["metadata"]["name"]
        path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
        for _ in range(10):
            sent = self.read(namespace, name)
            sent["spec"] = copy.deepcopy(body["spec"])
            sent["metadata"]["labels"] = copy.deepcopy(body["metadata"].get("labels", {}))
            try:
                return self.operator.put(path, sent)
            except ApiException as error:
                if error.status != 409:
                    raise
        raise AssertionError(f"{name}: still conflicting after 10 tries")

    def read(self, namespace: str, name: str) -> dict[str, Any]:
        return self.admin.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}")


@pytest.fixture
def cluster(kube_cluster: Path, kube_rest: Rest, hyperpod_crds: list[str], need, wait_authorized) -> Cluster:
    need((paths.TOOLS_BIN / "helm3").exists(), "pinned Helm 3 not built (make tools)")
    need((CHART / "Chart.yaml").exists(), "umbrella chart charts/kv-tiered-inference not present yet")
    assert hyperpod_fields.CRD_NAME in hyperpod_crds
    helm.build_dependencies(CHART)
    return Cluster(kube_cluster, kube_rest, wait_authorized)


@pytest.fixture
def install(cluster: Cluster) -> Iterator[Callable[..., str]]:
    """`install(namespace, *helm_args)`: the bundle with the HyperPod environment; uninstalled afterwards
    (its admission policy is cluster-scoped and would outlive the namespace)."""
    releases: list[tuple[str, int]] = []

    def run(namespace: str, *args: str, major: int = 3) -> str:
        base = ["--kubeconfig", str(cluster.kubeconfig), "-n", namespace, *SHARED_CLUSTER]
        # Release = namespace: its cluster-scoped objects (policy, StorageClass) get names of their own.
        install = ["install", namespace, str(CHART), *base, "-f", str(ENV), *args]
        result = helm.run(install, major=major, timeout=240)
        assert result.returncode == 0, result.stdout + result.stderr
        releases.append((namespace, major))
        return namespace

    yield run
    for namespace, major in releases:
        uninstall = ["uninstall", namespace, "--kubeconfig", str(cluster.kubeconfig), "-n", namespace]
        helm.run(uninstall, major=major, timeout=120)


def container(deployment: dict[str, Any], name: str = ENDPOINT) -> dict[str, Any]:
    (found,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == name]
    return found


def env_of(found: dict[str, Any]) -> dict[str, dict[str, Any]]:
    names = [e["name"] for e in found.get("env", [])]
    assert len(names) == len(set(names)), f"duplicate env names: {names}"
    return {e["name"]: e for e in found.get("env", [])}


def is_patched(deployment: dict[str, Any], cache: str = ENDPOINT) -> bool:
    return l2_dir_of(deployment, cache) is not None


def wait_for_policy(cluster: Cluster, namespace: str, multiprocess: bool = False) -> None:
    """Dry-run the operator's create until the new policy is in force (its informers lag the install)."""
    deadline = time.monotonic() + POLICY_WAIT
    body = operator_deployment(ENDPOINT, multiprocess=multiprocess)
    cache = SIDECAR if multiprocess else ENDPOINT
    while not is_patched(cluster.create(namespace, body, dry_run=True), cache):
        assert time.monotonic() < deadline, f"the L2 patch was not in force after {POLICY_WAIT:.0f}s"
        time.sleep(1)


def assert_fully_patched(deployment: dict[str, Any], multiprocess: bool = False, sealed: bool = True) -> None:
    """The L2 volume, mount and env on the container holding LMCache's settings (vLLM, or the LMCache
    server sidecar in MultiProcess mode), nothing on any other container. `sealed`: cache.l2.integrity,
    where that container imports the chart's L2 plugin (InProcess) or sealed adapter (MultiProcess) from
    the podscripts ConfigMap."""
    plugin = sealed and not multiprocess
    release = deployment["metadata"]["namespace"]  # release = namespace
    pod = deployment["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert sorted(volumes) == ["kvtier-l2cache", *(["kvtier-podscripts"] if sealed else []), "model-weights"]
    assert volumes["kvtier-l2cache"]["persistentVolumeClaim"] == {"claimName": f"{release}-l2cache"}
    annotations = deployment["spec"]["template"]["metadata"].get("annotations", {})
    if sealed:  # the chart's own podscripts ConfigMap; its checksum rolls the pods when a module changes
        assert volumes["kvtier-podscripts"]["configMap"]["name"].endswith("-podscripts"), volumes
        assert re.fullmatch(r"[0-9a-f]{64}", annotations.get("checksum/l2-plugin", "")), annotations
    else:
        assert "checksum/l2-plugin" not in annotations
    if multiprocess:
        vllm = container(deployment)
        assert vllm["env"] == [{"name": "LMCACHE_MP_SERVER", "value": "tcp://localhost:6555"}]
        assert vllm["volumeMounts"] == [{"name": "model-weights", "mountPath": "/opt/ml/model"}]
    cache = container(deployment, SIDECAR if multiprocess else ENDPOINT)
    l2_dir = l2_dir_of(deployment, cache["name"])
    assert l2_dir, cache.get("env")
    if multiprocess:  # LMCache's server takes its L2 from --l2-adapter, appended once
        assert cache["args"] == [*SERVER_ARGS, "--l2-adapter", l2_adapter_for(l2_dir, sealed)]
    else:
        assert "--l2-adapter" not in cache["args"]
    mounts = {(m["name"], m["mountPath"]): m.get("readOnly", False) for m in cache["volumeMounts"]}
    expected = {("model-weights", "/opt/ml/model"): False, ("kvtier-l2cache", MOUNT): False}
    assert mounts == {**expected, **({PODSCRIPTS: True} if sealed else {})}
    env = env_of(cache)
    wanted = {
        **PATCH_ENV,
        **(PLUGIN_ENV if plugin else {}),
        **({"PYTHONPATH": PODSCRIPTS[1]} if sealed else {}),
    }
    assert {k: env[k].get("value") for k in wanted} == wanted
    if plugin:  # the operator's LMCACHE_EXTRA_CONFIG and LMCACHE_REMOTE_URL replaced by the plugin's settings
        assert "LMCACHE_REMOTE_URL" not in env
        extra = json.loads(env["LMCACHE_EXTRA_CONFIG"]["value"])
        assert extra == {
            f"{PLUGIN}module_path": "l2_connector",
            f"{PLUGIN}class_name": "KvtierFSConnector",
            f"{PLUGIN}base_path": l2_dir,
            f"{PLUGIN}verify": True,
        }
    else:
        assert env["LMCACHE_REMOTE_URL"]["value"] == f"fs://localhost:0{l2_dir}/"
        assert "LMCACHE_EXTRA_CONFIG" not in env, "the operator's HyperPod L2 settings must be gone"
        assert "LMCACHE_REMOTE_STORAGE_PLUGINS" not in env
    # Everything else the operator set is kept.
    assert env["NODE_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP"
    assert env["LMCACHE_LOCAL_CPU"]["value"] == "True"
    # Sidecars are not the vLLM container: untouched, including their own env.
    proxy = container(deployment, "proxy")
    assert proxy["env"] == [{"name": "LMCACHE_EXTRA_CONFIG", "value": "x"}]
    assert "volumeMounts" not in proxy


def assert_untouched(deployment: dict[str, Any], sent: dict[str, Any], name: str) -> None:
    pod = deployment["spec"]["template"]["spec"]
    assert [v["name"] for v in pod["volumes"]] == ["model-weights"]
    sent_vllm = next(c for c in sent["spec"]["template"]["spec"]["containers"] if c["name"] == name)
    assert container(deployment, name)["env"] == sent_vllm["env"]
    assert container(deployment, name)["volumeMounts"] == sent_vllm["volumeMounts"]


def test_endpoint_objects_accepted_strictly_by_the_operator_crd(cluster: Cluster, make_namespace) -> None:
    """Rendered endpoints against the (SDK-derived, operator 3.7) CRD on the API server, unknown fields
    refused."""
    namespace = make_namespace("hp-crd", enforce="privileged")
    endpoints = []
    v37 = [*MULTIPROCESS, "--set-json", f"hyperpod.tolerations={json.dumps(TOLERATIONS)}"]
    for extra in ([], v37):  # InProcess as in the environment; then operator v3.7's fields
        args = ["template", namespace, str(CHART), "-n", namespace, "-f", str(ENV), *extra]
        result = helm.run(args)
        assert result.returncode == 0, result.stderr
        endpoints += [d for d in yaml.safe_load_all(result.stdout) if d and d["kind"] == hyperpod_fields.KIND]
    assert [e["metadata"]["name"] for e in endpoints] == [ENDPOINT, ENDPOINT]
    plural = hyperpod_fields.CRD_NAME.split(".")[0]
    path = f"/apis/{hyperpod_fields.GROUP}/{hyperpod_fields.VERSION}/namespaces/{namespace}/{plural}"
    strict = {"dryRun": "All", "fieldValidation": "Strict"}
    for endpoint in endpoints:
        stored = cluster.admin.request("POST", path, endpoint, query=strict)
        assert stored["spec"]["kvCacheSpec"]["l2CacheSpec"]["l2CacheBackend"] == "tieredstorage"
        assert stored["spec"].get("tolerations") == endpoint["spec"].get("tolerations")
        assert stored["spec"].get("lmcache") == endpoint["spec"].get("lmcache")
    assert endpoints[1]["spec"]["lmcache"] == {"mode": "MultiProcess"}
    broken = copy.deepcopy(endpoints[0])
    broken["spec"]["worker"]["volumeMounts"] = [{"name": "l2", "mountPath": MOUNT}]
    with pytest.raises(ApiException) as refused:
        cluster.admin.request("POST", path, broken, query=strict)
    assert 'unknown field "spec.worker.volumeMounts"' in json.loads(refused.value.body)["message"]


@pytest.mark.parametrize(
    ("api_version", "major"),
    [("", 3), ("", 4), ("admissionregistration.k8s.io/v1beta1", 3)],
    ids=[
        "served-version-from-capabilities-helm3",
        "served-version-from-capabilities-helm4",
        "v1beta1-override",
    ],
)
def test_operator_deployment_gets_the_full_patch_idempotently(
    cluster: Cluster, make_namespace, install, need, api_version: str, major: int
) -> None:
    need((paths.TOOLS_BIN / f"helm{major}").exists(), f"pinned Helm {major} not built (make tools)")
    suffix = api_version.rsplit("/", 1)[-1] or f"auto-helm{major}"
    namespace = install(
        make_namespace(f"hp-patch-{suffix}", enforce="privileged"),
        "--set",
        f"hyperpod.patch.apiVersion={api_version}",
        major=major,
    )
    served = api_version or "admissionregistration.k8s.io/v1"  # the newest this cluster serves
    name = f"{namespace}-{namespace}-hyperpod-l2"  # <namespace>-<release>-hyperpod-l2
    policy = cluster.admin.get(f"/apis/{served}/mutatingadmissionpolicies/{name}")
    assert policy["spec"]["failurePolicy"] == "Fail"
    plural = hyperpod_fields.CRD_NAME.split(".")[0]
    path = f"/apis/{hyperpod_fields.GROUP}/{hyperpod_fields.VERSION}/namespaces/{namespace}/{plural}"
    assert cluster.admin.get(f"{path}/{ENDPOINT}")["spec"]["kvCacheSpec"]["enableL2Cache"] is True
    cluster.grant_operator(namespace)
    wait_for_policy(cluster, namespace)
    assert_idempotent(cluster, namespace, multiprocess=False)


def assert_idempotent(cluster: Cluster, namespace: str, multiprocess: bool) -> None:
    """Create, reconcile twice, re-render with a change: patched each time, and no-ops change nothing."""
    rendered = operator_deployment(ENDPOINT, multiprocess=multiprocess)
    created = cluster.create(namespace, rendered)
    first = cluster.read(namespace, ENDPOINT)
    assert_fully_patched(first, multiprocess)
    assert created["spec"] == first["spec"]
    # The mounted ConfigMap is the release's own and holds the modules that container imports.
    (volume,) = [v for v in first["spec"]["template"]["spec"]["volumes"] if v["name"] == PODSCRIPTS[0]]
    scripts = cluster.admin.get(f"/api/v1/namespaces/{namespace}/configmaps/{volume['configMap']['name']}")
    modules = ("l2_adapter.py", "l2_blocks.py") if multiprocess else ("l2_connector.py", "l2_hits.py")
    assert {*modules, "l2_integrity.py"} <= set(scripts["data"]), sorted(scripts["data"])

    # The operator re-renders the same object (reconcile): the stored object does not change.
    again = copy.deepcopy(rendered)
    cluster.replace(namespace, again)
    second = cluster.read(namespace, ENDPOINT)
    assert second["spec"] == first["spec"]
    assert second["metadata"]["generation"] == first["metadata"]["generation"], "a no-op must not roll pods"

    # Writing back the already-patched object is a no-op too (nothing appended twice).
    cluster.replace(namespace, second)
    third = cluster.read(namespace, ENDPOINT)
    assert third["spec"] == first["spec"]

    # A real re-render (e.g. a new image after a CR change) drops the patch; the API server puts it back.
    changed = copy.deepcopy(rendered)
    container(changed)["image"] = "lmcache/vllm-openai:v0.5.6"
    cluster.replace(namespace, changed)
    fourth = cluster.read(namespace, ENDPOINT)
    assert container(fourth)["image"] == "lmcache/vllm-openai:v0.5.6"
    assert_fully_patched(fourth, multiprocess)


def test_multiprocess_patches_the_lmcache_server_sidecar_idempotently(
    cluster: Cluster, make_namespace, install
) -> None:
    """Operator v3.7 MultiProcess: the L2 lives in the LMCache server sidecar; vLLM is left as rendered."""
    namespace = install(make_namespace("hp-patch-mp", enforce="privileged"), *MULTIPROCESS)
    plural = hyperpod_fields.CRD_NAME.split(".")[0]
    path = f"/apis/{hyperpod_fields.GROUP}/{hyperpod_fields.VERSION}/namespaces/{namespace}/{plural}"
    stored = cluster.admin.get(f"{path}/{ENDPOINT}")
    assert stored["spec"]["lmcache"] == {"mode": "MultiProcess"}, "kept by the v3.7 CRD, not pruned"
    cluster.grant_operator(namespace)
    wait_for_policy(cluster, namespace, multiprocess=True)
    # A sidecar rendered without any args gets the argument list created (dry run: nothing stored).
    bare = operator_deployment(ENDPOINT, multiprocess=True)
    container(bare, SIDECAR).pop("args")
    stored = cluster.create(namespace, bare, dry_run=True)
    adapter = l2_adapter_for(l2_dir_of(stored, SIDECAR) or "")
    assert container(stored, SIDECAR)["args"] == ["--l2-adapter", adapter]
    # An --l2-adapter of ours for another namespace (from before an upgrade changed the endpoint's KV):
    # rewritten in place, not kept next to the new one; someone else's adapter is left alone.
    stale = operator_deployment(ENDPOINT, multiprocess=True)
    foreign = json.dumps({"type": "fs", "base_path": "/elsewhere"})
    old = json.dumps({"base_path": f"{MOUNT}/{ENDPOINT}.000000000000", "type": "fs"}, separators=(",", ":"))
    container(stale, SIDECAR)["args"] = ["--l2-adapter", foreign, "--l2-adapter", old, *SERVER_ARGS]
    stored = cluster.create(namespace, stale, dry_run=True)
    assert container(stored, SIDECAR)["args"] == [
        "--l2-adapter",
        foreign,
        "--l2-adapter",
        adapter,
        *SERVER_ARGS,
    ]
    assert_idempotent(cluster, namespace, multiprocess=True)


def test_multiprocess_patch_leaves_an_inprocess_shaped_deployment_alone(
    cluster: Cluster, make_namespace, install
) -> None:
    """With MultiProcess configured, a Deployment without the sidecar is not this shape: untouched."""
    namespace = install(make_namespace("hp-patch-mp-none", enforce="privileged"), *MULTIPROCESS)
    cluster.grant_operator(namespace)
    wait_for_policy(cluster, namespace, multiprocess=True)
    plain = operator_deployment(ENDPOINT)
    assert_untouched(cluster.create(namespace, plain, dry_run=True), plain, ENDPOINT)


def test_vllm_container_found_by_name_not_position(cluster: Cluster, make_namespace, install) -> None:
    """Also the InProcess patch without the L2 plugin (cache.l2.integrity false): LMCache's own fs connector
    on the endpoint's directory, LMCACHE_REMOTE_URL."""
    namespace = install(
        make_namespace("hp-patch-order", enforce="privileged"), "--set", "cache.l2.integrity=false"
    )
    cluster.grant_operator(namespace)
    wait_for_policy(cluster, namespace)
    cluster.create(namespace, operator_deployment(ENDPOINT, vllm_index=1))
    stored = cluster.read(namespace, ENDPOINT)
    assert stored["spec"]["template"]["spec"]["containers"][1]["name"] == ENDPOINT
    assert_fully_patched(stored, sealed=False)


def test_deployments_outside_the_match_are_unchanged(cluster: Cluster, make_namespace, install) -> None:
    namespace = install(make_namespace("hp-patch-scope", enforce="privileged"))
    elsewhere = make_namespace("hp-patch-elsewhere", enforce="privileged")
    for ns in (namespace, elsewhere):
        cluster.grant_operator(ns)
    wait_for_policy(cluster, namespace)

    # Not an endpoint of this release, though written by the operator with its usual shape.
    other = operator_deployment("other-model")
    cluster.create(namespace, other)
    assert_untouched(cluster.read(namespace, "other-model"), other, "other-model")

    # This release's endpoint name, but in another namespace.
    same_name = operator_deployment(ENDPOINT)
    cluster.create(elsewhere, same_name)
    assert_untouched(cluster.read(elsewhere, ENDPOINT), same_name, ENDPOINT)

    # The right name and namespace but without the operator's pod label.
    unlabelled = operator_deployment(ENDPOINT)
    other_labels = {"app.kubernetes.io/name": ENDPOINT}
    unlabelled["spec"]["selector"]["matchLabels"] = other_labels
    unlabelled["spec"]["template"]["metadata"]["labels"] = other_labels
    assert_untouched(cluster.create(namespace, unlabelled, dry_run=True), unlabelled, ENDPOINT)

    # The right object, written by someone other than the operator (here the test's admin).
    by_admin = cluster.create(namespace, operator_deployment(ENDPOINT), as_operator=False, dry_run=True)
    assert_untouched(by_admin, operator_deployment(ENDPOINT), ENDPOINT)


def test_each_endpoint_gets_its_own_l2_namespace(cluster: Cluster, make_namespace, install) -> None:
    """Two endpoints in one release: every model argument is /opt/ml/model, so each Deployment the
    operator writes gets its own L2 directory, never the other's."""
    first = yaml.safe_load(ENV.read_text())["models"][0]
    second = {**first, "name": "llama", "model": "meta-llama/Llama-3.1-8B-Instruct"}
    models = ["--set-json", f"models={json.dumps([first, second])}"]
    namespace = install(make_namespace("hp-patch-two", enforce="privileged"), *models)
    cluster.grant_operator(namespace)
    wait_for_policy(cluster, namespace)
    dirs = {}
    for name in (ENDPOINT, "llama"):
        cluster.create(namespace, operator_deployment(name))
        stored = cluster.read(namespace, name)
        dirs[name] = l2_dir_of(stored, name)
        assert dirs[name], container(stored, name).get("env")
    assert dirs[ENDPOINT] != dirs["llama"], dirs
