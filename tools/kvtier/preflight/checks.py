"""Checks of the cluster itself (both targets). Each takes the Target and returns one Result."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kvtier import scheduling
from kvtier.cluster.common import discovery
from kvtier.cluster.common.rest import ApiException
from kvtier.preflight.model import Result, Target
from kvtier.preflight.rules import SUPPORTED_MINORS
from kvtier.shapes import mapping
from kvtier.validate.checks import placement

INSTANCE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
GPU = "nvidia.com/gpu"
MODEL_LABEL = "kv-tiered-inference/model"  # the chart's label of a model's engine and router
PSA_ENFORCE = "pod-security.kubernetes.io/enforce"
Obj = dict[str, Any]


def k8s_version(t: Target) -> Result:
    info = t.rest.get("/version")
    found = re.match(r"\d+", info.get("minor", ""))  # EKS reports e.g. "33+"
    if not found:
        return Result("k8s-version", "warn", f"cannot read the minor version of {info.get('gitVersion')}")
    minor, (low, high) = int(found.group()), SUPPORTED_MINORS
    if minor < low:
        return Result("k8s-version", "fail", f"{info['gitVersion']} is older than 1.{low}")
    if minor > high:
        return Result(
            "k8s-version", "warn", f"{info['gitVersion']} is newer than the newest tested, 1.{high}"
        )
    return Result("k8s-version", "pass", info["gitVersion"])


def rbac(t: Target) -> Result:
    if t.manifests is None:
        return Result("rbac", "fail", f"cannot render the install to know what it creates: {t.render_error}")
    wanted: set[tuple[str, str, str]] = set()  # (group, resource, namespace or "")
    unserved: set[str] = set()
    for obj in t.manifests:
        resource = discovery.find(t.rest, obj["apiVersion"], obj["kind"])
        if resource is None:
            unserved.add(f"{obj['apiVersion']}/{obj['kind']}")
            continue
        namespace = (obj.get("metadata", {}).get("namespace") or t.namespace) if resource.namespaced else ""
        wanted.add((resource.group, resource.name, namespace))
    if not _namespace_exists(t):
        wanted.add(("", "namespaces", ""))
    denied = []
    for group, name, namespace in sorted(wanted):
        attributes = {"group": group, "resource": name, "verb": "create", "namespace": namespace}
        review = t.rest.post(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": attributes},
            },
        )
        if not review.get("status", {}).get("allowed"):
            where = f" in {namespace}" if namespace else " (cluster-wide)"
            denied.append(f"create {name}{'.' + group if group else ''}{where}")
    problems = [f"not served by the cluster: {', '.join(sorted(unserved))}"] if unserved else []
    if denied:
        problems.append("denied: " + "; ".join(denied))
    if problems:
        return Result("rbac", "fail", " | ".join(problems))
    return Result("rbac", "pass", f"allowed to create all {len(wanted)} kinds of object the install renders")


def _namespace_exists(t: Target) -> bool:
    """Whether the release namespace exists; True when we may not even read it (we will not create it)."""
    try:
        return t.rest.find(f"/api/v1/namespaces/{t.namespace}") is not None
    except ApiException as error:
        if error.status == 403:
            return True
        raise


def _labels(obj: Obj) -> dict[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


def _name(obj: Obj) -> str:
    return str(obj["metadata"]["name"])


def _instance_type(node: Obj) -> str:
    return next((_labels(node)[key] for key in INSTANCE_LABELS if key in _labels(node)), "")


def _gpus(node: Obj) -> int:
    return int(node.get("status", {}).get("allocatable", {}).get(GPU, "0"))


def _matches(node: Obj, selector: dict[str, Any]) -> bool:
    return all(_labels(node).get(key) == str(value) for key, value in (selector or {}).items())


def _rendered(t: Target, wanted: Callable[[Obj], bool]) -> placement.Workload | None:
    """The rendered workload `wanted` picks, as the pods it makes (None when nothing rendered). Objects
    that make no pods (the model's NetworkPolicy shares its labels and name) are passed over."""
    for m in t.manifests or []:
        workload = next(placement.workloads([m]), None) if wanted(m) else None
        if workload is not None:
            return workload
    return None


def _engine_of(name: str) -> Callable[[Obj], bool]:
    def wanted(m: Obj) -> bool:
        if m.get("kind") == placement.HYPERPOD_KIND:
            return mapping(m.get("spec")).get("modelName") == name
        labels = _labels(m)
        return labels.get("app.kubernetes.io/component") == "engine" and labels.get(MODEL_LABEL) == name

    return wanted


def _curvine_workers(m: Obj) -> bool:
    labels = _labels(m)
    return (
        m.get("kind") == "DaemonSet"
        and labels.get("app.kubernetes.io/part-of") == "curvine"
        and (labels.get("app.kubernetes.io/component") == "worker")
    )


def _placeable(t: Target, workload: placement.Workload) -> tuple[list[Obj], str]:
    """The nodes kube-scheduler could put the workload's pods on (taints, selection, cordons, requests;
    kvtier.scheduling), and why each other node cannot take them."""
    refusals = {_name(n): scheduling.refusal(workload.spec, n, workload.daemon) for n in t.nodes}
    return [n for n in t.nodes if refusals[_name(n)] is None], placement.grouped(refusals)


def model_nodes(t: Target, model: dict[str, Any]) -> tuple[list[Obj], str]:
    """Nodes a model's engine pods may land on, and why the others may not. From the rendered engine
    when the install renders; else (render failed) by the values' nodeSelector and instance type."""
    workload = _rendered(t, _engine_of(str(model.get("name"))))
    if workload is not None:
        return _placeable(t, workload)
    instance_type = model.get("instanceType") or ""
    labelled = [
        n
        for n in t.nodes
        if _matches(n, model.get("nodeSelector") or {})
        and (not instance_type or _instance_type(n) == instance_type)
    ]
    return labelled, _labels_only(t)


def _labels_only(t: Target) -> str:
    """What a result judged without the rendered pods says: taints, affinity and requests went unchecked."""
    if not t.render_error:
        return ""
    return f"judged by labels only, as the install did not render ({t.render_error})"


def gpu_nodes(t: Target) -> Result:
    models = t.get("models") or []
    if not models:
        return Result("gpu-nodes", "skip", "no models in the values")
    problems, notes = [], []
    demand: dict[frozenset[str], int] = {}  # GPUs wanted per set of candidate nodes
    for model in models:
        name, replicas = model.get("name", "?"), int(model.get("replicas", 1))
        per = int(model.get("gpusPerReplica", 1))
        candidates, refused = model_nodes(t, model)
        room = sum(_gpus(n) // per for n in candidates)
        wanted = model.get("instanceType") or "any instance type"
        if not candidates:
            seen = ", ".join(sorted({_instance_type(n) or "(unlabelled)" for n in t.nodes}))
            why = f": {refused}" if refused else ""
            problems.append(f"{name}: no node of {wanted} can take its pods (cluster has: {seen}){why}")
        elif room < replicas:
            problems.append(
                f"{name}: {len(candidates)} node(s) of {wanted} fit {room} replica(s) of {per} GPU(s), "
                f"needs {replicas}"
            )
        else:
            notes.append(f"{name}: {replicas}x{per} GPU on {len(candidates)} node(s) of {wanted}")
        key = frozenset(_name(n) for n in candidates)
        demand[key] = demand.get(key, 0) + replicas * per
    for key, gpus in demand.items():
        have = sum(_gpus(n) for n in t.nodes if _name(n) in key)
        if len(demand) > 1 and key and gpus > have:
            problems.append(
                f"models sharing {len(key)} node(s) need {gpus} GPUs together, allocatable {have}"
            )
    if problems:
        return Result("gpu-nodes", "fail", "; ".join(problems))
    unchecked = f"; {_labels_only(t)}" if t.render_error else ""
    return Result(
        "gpu-nodes",
        "pass",
        "; ".join(notes) + f" (allocatable; GPUs already in use not subtracted{unchecked})",
    )


def nvme_nodes(t: Target) -> Result:
    if not t.curvine:
        return Result("nvme-nodes", "skip", "curvine.enabled is false")
    selector = t.get("curvine.worker.nodeSelector") or {}
    daemon = _rendered(t, _curvine_workers)
    if daemon is not None:
        placeable, refused = _placeable(t, daemon)
    else:
        placeable, refused = [n for n in t.nodes if _matches(n, selector)], _labels_only(t)
    workers = {_name(n) for n in placeable}
    if not workers:
        why = f": {refused}" if refused else ""
        detail = f"no node can take the Curvine workers (nodeSelector {selector}){why}"
        return Result("nvme-nodes", "fail", detail)
    if not selector:
        return Result(
            "nvme-nodes",
            "warn",
            f"curvine.worker.nodeSelector is empty: workers go to all {len(workers)} nodes, "
            "including any without local NVMe",
        )
    gpu = {_name(n) for model in t.get("models") or [] for n in model_nodes(t, model)[0]}
    uncovered = sorted(gpu - workers)
    if uncovered:
        return Result(
            "nvme-nodes",
            "warn",
            f"{len(workers)} worker node(s); GPU node(s) without a worker (no local L2 writes): "
            + ", ".join(uncovered),
        )
    unchecked = f" ({_labels_only(t)})" if t.render_error else ""
    return Result(
        "nvme-nodes",
        "pass",
        f"{len(workers)} node(s) for Curvine workers: {', '.join(sorted(workers))}{unchecked}",
    )


def storage_conflicts(t: Target) -> Result:
    problems, notes = [], []
    curvine_class = ""
    if t.curvine:
        if t.get("curvine.csi.enabled", True):
            problems += _foreign(t, "/apis/storage.k8s.io/v1/csidrivers/curvine", "CSIDriver")
        if t.get("curvine.storageClass.enabled", True):
            curvine_class = t.get("curvine.storageClass.name") or f"{t.release}-curvine"
            problems += _foreign(t, f"/apis/storage.k8s.io/v1/storageclasses/{curvine_class}", "StorageClass")
    if t.get("cache.l2.enabled", False):
        claim = t.get("cache.l2.claim.existingClaim") or ""
        wanted_class = t.get("cache.l2.claim.storageClassName") or ""
        if claim:
            pvc = t.rest.find(f"/api/v1/namespaces/{t.namespace}/persistentvolumeclaims/{claim}")
            if pvc is None:
                problems.append(f"cache.l2.claim.existingClaim {claim!r} does not exist in {t.namespace}")
            elif "ReadWriteMany" not in (pvc["spec"].get("accessModes") or []):
                problems.append(f"existing claim {t.namespace}/{claim} is not ReadWriteMany")
            else:
                notes.append(f"L2 uses existing claim {claim}")
        elif (
            wanted_class
            and wanted_class != curvine_class
            and t.rest.find(f"/apis/storage.k8s.io/v1/storageclasses/{wanted_class}") is None
        ):
            problems.append(f"cache.l2.claim.storageClassName {wanted_class!r} does not exist")
    if problems:
        return Result("storage-conflicts", "fail", "; ".join(problems))
    return Result("storage-conflicts", "pass", "; ".join(notes) or "no conflicting CSIDriver or StorageClass")


def _foreign(t: Target, path: str, kind: str) -> list[str]:
    """A problem when the object at `path` exists and is not this release's."""
    obj = t.rest.find(path)
    if obj is None:
        return []
    notes = obj["metadata"].get("annotations") or {}
    owner = (notes.get("meta.helm.sh/release-name", ""), notes.get("meta.helm.sh/release-namespace", ""))
    if owner == (t.release, t.namespace):
        return []
    who = f"Helm release {owner[1]}/{owner[0]}" if owner[0] else "something other than Helm"
    return [f"{kind} {_name(obj)!r} already exists, owned by {who}"]


def pod_security(t: Target) -> Result:
    if not t.curvine:
        return Result("pod-security", "skip", "curvine.enabled is false: nothing needs privilege")
    namespace = t.rest.find(f"/api/v1/namespaces/{t.namespace}")
    if namespace is None:
        return Result(
            "pod-security",
            "warn",
            f"namespace {t.namespace} does not exist yet; created without labels it gets the cluster's "
            "default level (privileged unless the API server is configured otherwise)",
        )
    level = _labels(namespace).get(PSA_ENFORCE, "")
    if level in ("", "privileged"):
        return Result(
            "pod-security", "pass", f"namespace {t.namespace} enforce={level or '(unset: cluster default)'}"
        )
    return Result(
        "pod-security",
        "fail",
        f"namespace {t.namespace} enforces {level!r}: Curvine's CSI node plugin and workers need privileged",
    )


def release_immutable(t: Target) -> Result:
    problems = []
    if t.curvine:
        selector = f"app.kubernetes.io/instance={t.release},app.kubernetes.io/component=master"
        path = f"/apis/apps/v1/namespaces/{t.namespace}/statefulsets"
        wanted = int(t.get("curvine.master.replicas", 3))
        for sts in t.rest.get(path, labelSelector=selector)["items"]:
            if sts["spec"].get("replicas") != wanted:
                problems.append(
                    f"{_name(sts)} runs {sts['spec'].get('replicas')} masters, values ask for {wanted} "
                    "(Raft membership cannot change on upgrade)"
                )
    for obj in t.manifests or []:
        if obj.get("kind") != "InferenceEndpointConfig":
            continue
        namespace = obj["metadata"].get("namespace") or t.namespace
        live = t.rest.find(
            f"/apis/{obj['apiVersion']}/namespaces/{namespace}/inferenceendpointconfigs/{_name(obj)}"
        )
        if live is None:
            continue
        before = bool(live.get("spec", {}).get("intelligentRoutingSpec", {}).get("enabled", False))
        after = bool(obj.get("spec", {}).get("intelligentRoutingSpec", {}).get("enabled", False))
        if before != after:
            problems.append(
                f"InferenceEndpointConfig {_name(obj)}: intelligentRoutingSpec.enabled is {before}, "
                f"values make it {after} (cannot change after creation)"
            )
    if problems:
        return Result("release-immutable", "fail", "; ".join(problems))
    return Result("release-immutable", "pass", "nothing installed that the values would change illegally")
