"""The pod the HyperPod operator would build from a rendered endpoint, with the chart's L2 patch applied.

The operator is closed source, so its Deployment is built from the facts of kvtier.upstream.hyperpod_operator
(each with its source). The patch is read back from what the chart rendered: the MutatingAdmissionPolicy's
CEL (its literals: volume and mount names, paths, env names) or the Kyverno Policy's strategic-merge patch.
It is applied with the API server's merge keys (server-side apply and strategic merge agree here): volumes,
containers and env by name, volume mounts by mountPath. `judge` then says what the API server would refuse,
what hides the model, and what depends on a fact no public source states.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from kvtier.upstream import hyperpod_operator as op
from kvtier.upstream.hyperpod_fields import KIND as ENDPOINT_KIND

MAP_KIND = "MutatingAdmissionPolicy"
KYVERNO_KIND = "Policy"
# Pod volume sources (core/v1 VolumeSource): a volume with two of them is refused by the API server.
SOURCES = frozenset(
    {
        *("awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "configMap", "csi"),
        *("downwardAPI", "emptyDir", "ephemeral", "fc", "flexVolume", "flocker", "gcePersistentDisk"),
        *("gitRepo", "glusterfs", "hostPath", "image", "iscsi", "nfs", "persistentVolumeClaim"),
        *("photonPersistentDisk", "portworxVolume", "projected", "quobyte", "rbd", "scaleIO", "secret"),
        *("storageos", "vsphereVolume"),
    }
)
OPERATOR_SOURCE = "operatorManaged"  # stands for the model volume's source, which is not published

# Literals of the policy's CEL (templates/hyperpod-mutatingadmissionpolicy.yaml): JSON-quoted strings.
_STR = r'"(?:[^"\\]|\\.)*"'
_CEL_VOLUME = re.compile(rf"\.volumes\{{\s*name: ({_STR}),\s*(\w+):")
_CEL_MOUNT = re.compile(rf"\.volumeMounts\{{\s*name: ({_STR}),\s*mountPath: ({_STR})(,\s*readOnly: true)?")
_CEL_ENV = re.compile(rf"\.env\{{name: ({_STR})")
_CEL_REMOVE = re.compile(rf"^\s*({_STR}) in variables\.env\s*\?\s*\[JSONPatch\{{op: \"remove\"")


@dataclass
class Patch:
    """What the chart's patch does to one endpoint's Deployment."""

    subject: str  # Kind/name of the policy
    cache: str  # the container it patches; "" = the one named like the Deployment (vLLM, InProcess)
    volumes: list[dict[str, Any]] = field(default_factory=list)
    mounts: list[dict[str, Any]] = field(default_factory=list)
    set_env: list[str] = field(default_factory=list)
    removed_env: list[str] = field(default_factory=list)

    def container_for(self, endpoint: str) -> str:
        return self.cache or endpoint


def read_policy(obj: dict[str, Any]) -> Patch | None:
    """The patch a rendered MutatingAdmissionPolicy or Kyverno Policy carries; None for other objects."""
    kind = obj.get("kind")
    subject = f"{kind}/{(obj.get('metadata') or {}).get('name')}"
    spec = obj.get("spec") or {}
    if kind == MAP_KIND:
        return _read_map(subject, spec)
    if kind == KYVERNO_KIND and str(obj.get("apiVersion", "")).startswith("kyverno.io/"):
        return _read_kyverno(subject, spec)
    return None


def _read_map(subject: str, spec: dict[str, Any]) -> Patch:
    variables = {v.get("name"): str(v.get("expression", "")) for v in spec.get("variables") or []}
    cache = variables.get("cache", "object.metadata.name")
    patch = Patch(subject, "" if cache == "object.metadata.name" else json.loads(cache))
    for mutation in spec.get("mutations") or []:
        if mutation.get("patchType") == "JSONPatch":
            found = _CEL_REMOVE.match(str((mutation.get("jsonPatch") or {}).get("expression", "")))
            if found:
                patch.removed_env.append(json.loads(found.group(1)))
        elif mutation.get("patchType") == "ApplyConfiguration":
            text = str((mutation.get("applyConfiguration") or {}).get("expression", ""))
            for name, source in _CEL_VOLUME.findall(text):
                patch.volumes.append({"name": json.loads(name), source: {}})
            for name, path, read_only in _CEL_MOUNT.findall(text):
                mount = {"name": json.loads(name), "mountPath": json.loads(path)}
                patch.mounts.append({**mount, "readOnly": True} if read_only else mount)
            patch.set_env += [json.loads(name) for name in _CEL_ENV.findall(text)]
    return patch


def _read_kyverno(subject: str, spec: dict[str, Any]) -> Patch | None:
    """Kyverno: one rule per endpoint, alike but for the L2 value; the first rule's patch stands for all."""
    for rule in spec.get("rules") or []:
        for each in (rule.get("mutate") or {}).get("foreach") or []:
            pod = (((each.get("patchStrategicMerge") or {}).get("spec") or {}).get("template") or {}).get(
                "spec"
            )
            if not pod:
                continue
            patch = Patch(subject, "", volumes=copy.deepcopy(pod.get("volumes") or []))
            for c in pod.get("containers") or []:
                patch.mounts += copy.deepcopy(c.get("volumeMounts") or [])
                for env in c.get("env") or []:
                    (patch.removed_env if env.get("$patch") == "delete" else patch.set_env).append(
                        env["name"]
                    )
            return patch
    return None


def operator_deployment(endpoint: dict[str, Any]) -> dict[str, Any]:
    """The Deployment the operator renders for `endpoint`, as far as its facts reach (hyperpod_operator)."""
    name = str((endpoint.get("metadata") or {}).get("name", ""))
    spec = endpoint.get("spec") or {}
    worker = spec.get("worker") or {}
    model = worker.get("modelVolumeMount") or {}
    model_path = model.get("mountPath", op.MODEL_MOUNT_DEFAULT)
    env: list[dict[str, Any]] = copy.deepcopy(worker.get("environmentVariables") or [])  # WORKER_ENV
    kv = spec.get("kvCacheSpec") or {}
    backend = str((kv.get("l2CacheSpec") or {}).get("l2CacheBackend", "")).lower()
    if kv.get("enableL2Cache") is True and backend == "tieredstorage":  # L2_ENV, which the patch replaces
        env += [{"name": n, "value": "(set by the operator)"} for n in op.OPERATOR_L2_ENV]
    vllm: dict[str, Any] = {
        "name": name,  # WORKER_CONTAINER
        "image": worker.get("image"),
        "args": list(worker.get("args") or []),  # WORKER_ARGS
        "env": env,
        "volumeMounts": [{"name": model.get("name"), "mountPath": model_path}],  # MODEL_MOUNT
    }
    # EXTRA_VOLUMES; MODEL_VOLUME_NAME: the model volume itself, unless spec.kubernetes.volumes supplies it
    # (modelSourceType kubernetesVolume), with a source no public source names (MODEL_VOLUME_SOURCE).
    volumes: list[dict[str, Any]] = copy.deepcopy((spec.get("kubernetes") or {}).get("volumes") or [])
    if model.get("name") not in {v.get("name") for v in volumes}:
        volumes.insert(0, {"name": model.get("name"), OPERATOR_SOURCE: {}})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [vllm], "volumes": volumes},
            }
        },
    }


def _merge_by(items: list[dict[str, Any]], add: dict[str, Any], key: str) -> None:
    """Merge `add` into the list entry with the same `key` (the API's list-map merge), else append it."""
    for item in items:
        if item.get(key) == add.get(key):
            item.update(copy.deepcopy(add))
            return
    items.append(copy.deepcopy(add))


def apply(deployment: dict[str, Any], patch: Patch) -> dict[str, Any]:
    """`deployment` as the API server stores it after the patch (a copy). The patched container is created
    when missing, as the merge would; the policy's match condition would in fact skip such a Deployment."""
    out = copy.deepcopy(deployment)
    pod = out["spec"]["template"]["spec"]
    target = patch.container_for(out["metadata"]["name"])
    container = next((c for c in pod["containers"] if c.get("name") == target), None)
    if container is None:
        container = {"name": target}
        pod["containers"].append(container)
    container["env"] = [e for e in container.get("env") or [] if e.get("name") not in patch.removed_env]
    for name in patch.set_env:
        _merge_by(container["env"], {"name": name, "value": "(set by the patch)"}, "name")
    for volume in patch.volumes:
        _merge_by(pod.setdefault("volumes", []), volume, "name")
    for mount in patch.mounts:
        _merge_by(container.setdefault("volumeMounts", []), mount, "mountPath")
    return out


Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Issue:
    topic: Literal["volume", "mount", "env", "fields"]
    severity: Severity
    message: str
    path: str  # the endpoint's field that decides it
    fact: op.Fact | None = None  # the unpublished fact that would decide a warning


def _under(path: str, parent: str) -> bool:
    return path.rstrip("/").startswith(parent.rstrip("/") + "/")


def judge(endpoint: dict[str, Any], patch: Patch) -> list[Issue]:
    """What goes wrong in the endpoint's pod once the patch is applied to the operator's Deployment."""
    name = str((endpoint.get("metadata") or {}).get("name", ""))
    spec = endpoint.get("spec") or {}
    worker = spec.get("worker") or {}
    before = operator_deployment(endpoint)
    after = apply(before, patch)
    pod = after["spec"]["template"]["spec"]
    model = worker.get("modelVolumeMount") or {}
    model_name, model_path = model.get("name"), model.get("mountPath", op.MODEL_MOUNT_DEFAULT)
    issues: list[Issue] = []
    own = {v["name"] for v in before["spec"]["template"]["spec"]["volumes"]}
    for volume in patch.volumes:
        if volume["name"] in own:
            where = (
                "spec.worker.modelVolumeMount.name"
                if volume["name"] == model_name
                else "spec.kubernetes.volumes"
            )
            issues.append(
                Issue(
                    "volume",
                    "error",
                    f"the L2 patch's volume (hyperpod.patch.volumeName) {volume['name']!r} has the name of "
                    f"the operator's volume of endpoint {name} ({where}; for the model volume: "
                    "hyperpod.worker.modelVolumeName); the merge makes them one volume with two sources, "
                    "which the API server refuses (or, for two claims, the L2 claim replaces the model's)",
                    where,
                )
            )
    for volume in pod["volumes"]:
        sources = [k for k in volume if k in SOURCES or k == OPERATOR_SOURCE]
        if len(sources) > 1 and not any(i.topic == "volume" for i in issues):
            issues.append(Issue("volume", "error", f"volume {volume['name']!r} has sources {sources}", ""))
    cache = next(c for c in pod["containers"] if c["name"] == patch.container_for(name))
    multiprocess = bool(patch.cache)
    claims = {v["name"] for v in patch.volumes if "persistentVolumeClaim" in v}  # the L2 (not podscripts)
    l2_mounts = [m for m in patch.mounts if m["name"] in claims]
    for mount in l2_mounts:
        path = mount["mountPath"]
        if path.rstrip("/") == model_path.rstrip("/") and not multiprocess:
            issues.append(
                Issue(
                    "mount",
                    "error",
                    f"the L2 mount (cache.l2.mountPath) {path} is the operator's model mount of endpoint "
                    f"{name} (hyperpod.worker.modelMountPath, {model_path}); mounts merge by path, so the L2 "
                    "volume takes the model's place and the model server finds no model there",
                    "spec.worker.modelVolumeMount.mountPath",
                )
            )
        elif path.rstrip("/") == model_path.rstrip("/"):
            issues.append(
                Issue(
                    "mount",
                    "warning",
                    f"the L2 mount (cache.l2.mountPath) {path} is the model mount path of endpoint {name}; "
                    "in MultiProcess mode it lands in the LMCache server sidecar, which may mount the model "
                    "there too",
                    "spec.worker.modelVolumeMount.mountPath",
                    op.SIDECAR_MOUNTS,
                )
            )
        elif _under(path, model_path):
            issues.append(
                Issue(
                    "mount",
                    "warning",
                    f"the L2 mount (cache.l2.mountPath) {path} is under the operator's model mount "
                    f"(hyperpod.worker.modelMountPath, {model_path}) of endpoint {name}: the kubelet must "
                    "create its mount point inside the model volume (impossible if that is read-only) and "
                    "the KV files show up in the model's directory",
                    "spec.worker.modelVolumeMount.mountPath",
                    op.MODEL_MOUNT_READ_ONLY,
                )
            )
        elif _under(model_path, path) and not multiprocess:
            issues.append(
                Issue(
                    "mount",
                    "warning",
                    f"the operator's model mount {model_path} of endpoint {name} is under the L2 mount "
                    f"(cache.l2.mountPath) {path}: the model's mount point is created inside the shared L2 "
                    "volume, and the L2 volume hides whatever the image has at that path (decided by the "
                    "worker image's contents there)",
                    "spec.worker.modelVolumeMount.mountPath",
                )
            )
    paths = [m.get("mountPath") for m in cache.get("volumeMounts") or []]
    names = {v["name"] for v in pod["volumes"]}
    for mount in cache.get("volumeMounts") or []:
        if mount.get("name") not in names:
            issues.append(Issue("mount", "error", f"mount {mount} names no volume of the pod", ""))
    if len(paths) != len(set(paths)):
        issues.append(
            Issue("mount", "error", f"duplicate mount paths in container {cache['name']}: {paths}", "")
        )
    own_env = {e.get("name") for e in worker.get("environmentVariables") or []}
    for env_name in patch.removed_env:
        if env_name in patch.set_env or env_name in op.OPERATOR_L2_ENV or env_name in own_env:
            continue
        issues.append(
            Issue(
                "env",
                "warning",
                f"the L2 patch removes {env_name} (hyperpod.patch.removeEnv) from endpoint {name}'s "
                f"{'LMCache server sidecar' if multiprocess else 'vLLM container'}, which the operator is "
                "not known to set: a misspelt name leaves the variable it meant in place",
                "spec.worker",
                op.OTHER_ENV,
            )
        )
    for env_name in sorted(own_env & set(patch.removed_env)):
        issues.append(
            Issue(
                "env",
                "error",
                f"spec.worker.environmentVariables sets {env_name}, which the L2 patch removes or overrides "
                f"in endpoint {name}'s pod: the endpoint's value never reaches the model server",
                "spec.worker.environmentVariables",
            )
        )
    if multiprocess:
        for env_name in sorted(e for e in own_env if e.startswith("LMCACHE_")):
            issues.append(
                Issue(
                    "env",
                    "warning",
                    f"spec.worker.environmentVariables sets {env_name} for endpoint {name}; the operator "
                    "sets those on the vLLM container, while in MultiProcess mode LMCache's settings live in "
                    "its server sidecar",
                    "spec.worker.environmentVariables",
                    op.OTHER_ENV,
                )
            )
    for key in sorted(set(worker) - set(op.WORKER_FIELDS)):
        issues.append(
            Issue(
                "fields",
                "error",
                f"spec.worker.{key} of endpoint {name} is no field of the operator's CRD: the API server "
                "prunes it and the operator never delivers it to the pod (env goes in "
                "spec.worker.environmentVariables, arguments in spec.worker.args)",
                f"spec.worker.{key}",
            )
        )
    return issues


def endpoints_and_patch(manifests: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Patch | None]:
    """The rendered endpoints and the chart's patch (None when no patch is rendered)."""
    endpoints = [m for m in manifests if m.get("kind") == ENDPOINT_KIND]
    patches = [p for p in (read_policy(m) for m in manifests) if p is not None]
    return endpoints, (patches[0] if patches else None)
