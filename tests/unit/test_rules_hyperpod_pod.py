"""The HyperPod operator-pod rules (kvtier.validate.checks.hyperpod_pod_rules): the operator's Deployment
built from a rendered endpoint, the chart's L2 patch applied, the result judged.

Two kinds of input: the real chart rendered by the pinned Helm (the patch as users get it, both carriers),
and hand-made endpoints for what the chart cannot render (worker fields outside the CRD, endpoint env).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from harness import hyperpod_patch as harness
from kvtier import helm, paths
from kvtier.upstream import hyperpod_operator
from kvtier.validate import catalogue
from kvtier.validate.checks import hyperpod_pod
from kvtier.validate.findings import Finding
from kvtier.validate.rules import ManifestsContext

CHART = paths.CHARTS / "kv-tiered-inference"
ENV = paths.VALUES / "hyperpod-g6e-4xlarge.yaml"
VOLUME, MOUNT, ENVS, FIELDS = (
    "hyperpod-l2-volume-name",
    "hyperpod-l2-mount-path",
    "hyperpod-l2-patch-env",
    "hyperpod-worker-fields-delivered",
)
OURS = (VOLUME, MOUNT, ENVS, FIELDS)


@pytest.fixture(scope="module")
def render(need):
    """`render(*--set args)`: the chart's objects for the HyperPod environment, rendered by pinned Helm 3."""
    need((paths.TOOLS_BIN / "helm3").exists(), "pinned Helm 3 not built (make tools)")
    helm.build_dependencies(CHART)

    def run(*sets: str) -> list[dict[str, Any]]:
        args = ["template", "r", str(CHART), "-n", "kv", "-f", str(ENV)]
        for s in sets:
            args += ["--set", s]
        result = helm.run(args)
        assert result.returncode == 0, result.stderr
        return [d for d in yaml.safe_load_all(result.stdout) if d]

    return run


def _run(manifests: list[dict[str, Any]], *rules: str) -> list[Finding]:
    return catalogue.run_manifests(ManifestsContext(manifests, "kv"), "env.yaml", only=rules or OURS)


def test_rules_are_registered_for_the_rendered_objects() -> None:
    rules = catalogue.all_rules()
    assert {rules[r].scope for r in OURS} == {"manifests"}


def test_the_environment_as_shipped_passes(render) -> None:
    manifests = render()
    assert _run(manifests) == []
    # ...and the patch was read back: the L2 claim mounted where the chart says, in the vLLM container
    _, patch = hyperpod_pod.endpoints_and_patch(manifests)
    assert patch is not None and patch.subject.startswith("MutatingAdmissionPolicy/")
    assert {"name": "kvtier-l2cache", "mountPath": "/mnt/curvine/l2cache"} in patch.mounts
    assert "LMCACHE_REMOTE_URL" in patch.removed_env and "PYTHONHASHSEED" in patch.set_env


@pytest.mark.parametrize("sets", [(), ("cache.l2.integrity=false",), ("hyperpod.lmcache.mode=MultiProcess",)])
def test_policy_reads_back_as_the_api_server_tests_read_it(render, sets: tuple[str, ...]) -> None:
    """The variables the patch sets agree with tests/harness/hyperpod_patch.py, whose reading the cluster
    tests hold against what the real API server stores; the Kyverno carrier sets the same ones."""
    manifests = render(*sets)
    [policy] = [m for m in manifests if m["kind"] == "MutatingAdmissionPolicy"]
    _, patch = hyperpod_pod.endpoints_and_patch(manifests)
    assert patch is not None
    assert sorted(patch.set_env) == sorted(harness.applied_env(policy, "qwen2-7b"))
    assert patch.cache == ("lmcache-server" if sets and "MultiProcess" in sets[0] else "")
    if not sets or "integrity" in sets[0]:  # InProcess: the Kyverno alternative carries the same patch
        _, kyverno = hyperpod_pod.endpoints_and_patch(render(*sets, "hyperpod.patch.mechanism=kyverno"))
        assert kyverno is not None and kyverno.subject.startswith("Policy/")
        assert sorted(kyverno.set_env) == sorted(patch.set_env)
        assert sorted(kyverno.mounts, key=str) == sorted(patch.mounts, key=str)
        assert [v["name"] for v in kyverno.volumes] == [v["name"] for v in patch.volumes]
        assert set(kyverno.removed_env) == set(patch.removed_env) - set(patch.set_env)


@pytest.mark.parametrize("mechanism", ["mutatingAdmissionPolicy", "kyverno"])
def test_l2_mounted_at_the_model_path_is_an_error(render, mechanism: str) -> None:
    [f] = _run(render("cache.l2.mountPath=/opt/ml/model", f"hyperpod.patch.mechanism={mechanism}"))
    assert (f.rule, f.severity, f.subject) == (MOUNT, "error", "InferenceEndpointConfig/qwen2-7b")
    assert f.path == "spec.worker.modelVolumeMount.mountPath"
    assert "the L2 volume takes the model's place" in f.message and "cache.l2.mountPath" in f.message


def test_l2_mounted_under_the_model_path_warns_naming_the_unknown_fact(render) -> None:
    [f] = _run(render("cache.l2.mountPath=/opt/ml/model/kvcache"))
    assert (f.rule, f.severity) == (MOUNT, "warning")
    assert hyperpod_operator.MODEL_MOUNT_READ_ONLY.what in f.message
    assert not hyperpod_operator.MODEL_MOUNT_READ_ONLY.known


def test_model_mount_under_the_l2_mount_warns(render) -> None:
    [f] = _run(render("cache.l2.mountPath=/opt/ml"))
    assert (f.rule, f.severity) == (MOUNT, "warning")
    assert "model mount /opt/ml/model of endpoint qwen2-7b is under the L2 mount" in f.message


def test_a_sibling_path_is_not_under_the_model(render) -> None:
    assert _run(render("cache.l2.mountPath=/opt/ml/model-cache")) == []


@pytest.mark.parametrize(
    "setting", ["hyperpod.patch.volumeName=model-weights", "hyperpod.worker.modelVolumeName=kvtier-l2cache"]
)
def test_patch_volume_named_like_the_model_volume_is_an_error(render, setting: str) -> None:
    [f] = _run(render(setting))
    assert (f.rule, f.severity, f.path) == (VOLUME, "error", "spec.worker.modelVolumeMount.name")
    assert "one volume with two sources, which the API server refuses" in f.message


def test_removing_a_variable_the_operator_does_not_set_warns(render) -> None:
    [f] = _run(render("hyperpod.patch.removeEnv={LMCACHE_EXTRA_CONFG}"))
    assert (f.rule, f.severity) == (ENVS, "warning")
    assert "removes LMCACHE_EXTRA_CONFG" in f.message and hyperpod_operator.OTHER_ENV.what in f.message


def test_multiprocess_model_path_clash_is_only_a_warning(render) -> None:
    # The mount lands in the LMCache server sidecar, whose own mounts no public source lists.
    [f] = _run(render("hyperpod.lmcache.mode=MultiProcess", "cache.l2.mountPath=/opt/ml/model"))
    assert (f.rule, f.severity) == (MOUNT, "warning")
    assert hyperpod_operator.SIDECAR_MOUNTS.what in f.message


# --- what the chart cannot render: hand-made endpoints next to the rendered patch ---------------------


def _endpoint(render, **worker: Any) -> list[dict[str, Any]]:
    manifests = copy.deepcopy(render())
    [endpoint] = [m for m in manifests if m["kind"] == "InferenceEndpointConfig"]
    endpoint["spec"]["worker"].update(worker)
    return manifests


def test_worker_fields_outside_the_crd_are_errors(render) -> None:
    env = [{"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"}]
    [f] = _run(_endpoint(render, env=env), FIELDS)
    assert (f.severity, f.path) == ("error", "spec.worker.env")
    assert "prunes it and the operator never delivers it" in f.message
    assert _run(_endpoint(render, environmentVariables=env), FIELDS) == []


def test_endpoint_env_the_patch_owns_never_arrives(render) -> None:
    env = [{"name": "PYTHONHASHSEED", "value": "123"}]
    [f] = _run(_endpoint(render, environmentVariables=env), ENVS)
    assert (f.severity, f.path) == ("error", "spec.worker.environmentVariables")
    assert "sets PYTHONHASHSEED, which the L2 patch removes or overrides" in f.message


def test_extra_operator_volume_of_the_patch_name_is_an_error(render) -> None:
    manifests = copy.deepcopy(render())
    [endpoint] = [m for m in manifests if m["kind"] == "InferenceEndpointConfig"]
    endpoint["spec"]["kubernetes"] = {"volumes": [{"name": "kvtier-l2cache", "emptyDir": {}}]}
    [f] = _run(manifests, VOLUME)
    assert f.path == "spec.kubernetes.volumes" and f.severity == "error"


def test_apply_merges_like_the_api_server() -> None:
    """A unit of the merge itself: mounts by path, volumes and env by name, removals first."""
    endpoint = {
        "kind": "InferenceEndpointConfig",
        "metadata": {"name": "ep"},
        "spec": {
            "kvCacheSpec": {"enableL2Cache": True, "l2CacheSpec": {"l2CacheBackend": "tieredstorage"}},
            "worker": {
                "modelVolumeMount": {"name": "m", "mountPath": "/opt/ml/model"},
                "args": ["/opt/ml/model"],
            },
        },
    }
    patch = hyperpod_pod.Patch(
        "MutatingAdmissionPolicy/p",
        "",
        volumes=[{"name": "l2", "persistentVolumeClaim": {}}],
        mounts=[{"name": "l2", "mountPath": "/opt/ml/model"}],
        set_env=["PYTHONHASHSEED"],
        removed_env=["LMCACHE_REMOTE_URL", "PYTHONHASHSEED"],
    )
    pod = hyperpod_pod.apply(hyperpod_pod.operator_deployment(endpoint), patch)["spec"]["template"]["spec"]
    [vllm] = pod["containers"]
    assert vllm["volumeMounts"] == [{"name": "l2", "mountPath": "/opt/ml/model"}]
    assert [e["name"] for e in vllm["env"]] == ["LMCACHE_EXTRA_CONFIG", "PYTHONHASHSEED"]
    assert [v["name"] for v in pod["volumes"]] == ["m", "l2"]


def test_a_model_volume_supplied_by_the_endpoint_is_the_operators_model_volume(render) -> None:
    # modelSourceType kubernetesVolume (the operator chart's v1_nvme_k8s_volume sample): spec.kubernetes
    # .volumes supplies the volume modelVolumeMount names; one volume, no clash with the L2 patch.
    manifests = copy.deepcopy(render())
    [endpoint] = [m for m in manifests if m["kind"] == "InferenceEndpointConfig"]
    model = {"name": "model-weights", "hostPath": {"path": "/opt/dlami/nvme/qwen2", "type": "Directory"}}
    endpoint["spec"]["kubernetes"] = {"volumes": [model]}
    pod = hyperpod_pod.operator_deployment(endpoint)["spec"]["template"]["spec"]
    assert pod["volumes"] == [model]
    assert _run(manifests) == []
