"""With `--context`: whether any node of that cluster could ever run each rendered workload's pods, as
kube-scheduler filters nodes (kvtier.scheduling: taints and tolerations, nodeSelector and node affinity,
allocatable resources, cordons).

The API server admits a pod no node can take; it stays Pending with `FailedScheduling` and nothing else
says why. A common cause is Helm's list replacement: a values file that adds one toleration replaces the
list, and the pods lose the GPU nodes' toleration. Only the cluster knows its nodes, so this runs only when
one is named. Nodes are judged empty (other pods' requests are not subtracted): an error means no node
could ever take the pods; a workload whose labels match no node at all is a warning, since a node
autoscaler may still add one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kvtier import scheduling
from kvtier.manifests import pod_templates, subject
from kvtier.shapes import mapping
from kvtier.validate.findings import Finding

PLACEMENT = "cluster placement"  # the check's row in the summary
HYPERPOD_KIND = "InferenceEndpointConfig"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
SUGGESTIONS = {
    # A values list replaces the chart's default list (Helm merges maps only), the usual way to lose one.
    "TaintToleration": "tolerate the nodes' taints; a tolerations list in values replaces the chart's, so "
    "repeat the ones it had",
    "NodeResourcesFit": "lower the requests to fit the nodes' allocatable, or add larger nodes",
    "NodeUnschedulable": "uncordon a matching node (kubectl uncordon), or add one",
}


@dataclass(frozen=True)
class Workload:
    subject: str  # Deployment/x
    where: str  # field path of its pod spec in the manifest
    spec: dict[str, Any]  # a pod spec as the scheduler sees it
    daemon: bool


def workloads(manifests: list[dict[str, Any]]) -> Iterator[Workload]:
    """Every rendered object that makes pods, with its pod spec; a HyperPod endpoint as the pods its
    operator creates (its instance type as the node label, its tolerations, the worker's resources)."""
    for m, where, spec in pod_templates(manifests):
        if not spec.get("nodeName"):  # a pod bound by name skips the scheduler
            yield Workload(subject(m), where, spec, m.get("kind") == "DaemonSet")
    for m in manifests:
        if isinstance(m, dict) and m.get("kind") == HYPERPOD_KIND:
            spec = mapping(m.get("spec"))
            pod: dict[str, Any] = {
                "containers": [{"resources": mapping(mapping(spec.get("worker")).get("resources"))}]
            }
            if spec.get("instanceType"):
                pod["nodeSelector"] = {INSTANCE_TYPE: spec["instanceType"]}
            if "tolerations" in spec:
                pod["tolerations"] = spec["tolerations"]
            yield Workload(subject(m), "spec", pod, False)


def _path(workload: Workload, plugin: str) -> str:
    """The rendered field a refusal is about, for the trace back to the values key."""
    hyperpod = workload.subject.startswith(HYPERPOD_KIND + "/")
    if plugin == "TaintToleration":
        return f"{workload.where}.tolerations"
    if plugin == "NodeResourcesFit":
        return "spec.worker.resources" if hyperpod else f"{workload.where}.containers[0].resources"
    if hyperpod:
        return "spec.instanceType"
    return f"{workload.where}.nodeSelector"


def grouped(refusals: dict[str, scheduling.Refusal | None]) -> str:
    """Each reason once, with how many nodes gave it and the first few names."""
    by_reason: dict[str, list[str]] = {}
    for name, r in sorted(refusals.items()):
        if r is not None:
            by_reason.setdefault(r.detail, []).append(name)
    parts = []
    for detail, names in sorted(by_reason.items(), key=lambda item: -len(item[1])):
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        parts.append(f"{len(names)} node(s) ({shown}): {detail}")
    return "; ".join(parts)


def judge(workload: Workload, nodes: list[dict[str, Any]], file: str) -> Finding | None:
    """A finding when no node could take the workload's pods, naming each node's reason."""
    refusals = {
        str(mapping(n.get("metadata")).get("name")): scheduling.refusal(workload.spec, n, workload.daemon)
        for n in nodes
    }
    if not refusals or any(r is None for r in refusals.values()):
        return None
    reasons = [r for r in refusals.values() if r is not None]
    matching = [r for r in reasons if r.plugin != "NodeAffinity"]
    listed = grouped(refusals)
    if not matching:  # no node carries the labels: an autoscaler may add one
        return Finding(
            PLACEMENT,
            "cluster.placement",
            f"no node of the cluster matches the pods' node selection ({len(nodes)} nodes: {listed}); "
            "they stay Pending unless a node autoscaler adds a matching node",
            file,
            path=_path(workload, "NodeAffinity"),
            subject=workload.subject,
            severity="warning",
            suggestion="label the nodes meant for these pods, or change the nodeSelector / instanceType",
        )
    plugin = max({r.plugin for r in matching}, key=lambda p: sum(r.plugin == p for r in matching))
    return Finding(
        PLACEMENT,
        "cluster.placement",
        f"no node can ever run these pods (kube-scheduler filters out every node; they stay Pending): "
        f"{listed}",
        file,
        path=_path(workload, plugin),
        subject=workload.subject,
        severity="error",
        suggestion=SUGGESTIONS[plugin],
    )


def check(
    nodes: list[dict[str, Any]], manifests: list[dict[str, Any]], file: str
) -> tuple[list[Finding], int]:
    """The findings, and how many workloads were judged."""
    judged = list(workloads(manifests))
    findings = [f for w in judged if (f := judge(w, nodes, file)) is not None]
    return findings, len(judged)


__all__ = ["PLACEMENT", "Workload", "check", "grouped", "judge", "workloads"]
