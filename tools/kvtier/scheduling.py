"""Whether a node could ever take a pod, as kube-scheduler's filter plugins decide it, read at the pinned
control plane's version (k8s.io/kubernetes pkg/scheduler/framework/plugins): NodeUnschedulable,
TaintToleration, NodeAffinity (nodeSelector and required node affinity) and NodeResourcesFit against the
node's allocatable.

"Ever" means an empty node: what other pods already use is not subtracted, so a verdict here is about the
spec, not about today's load. tests/cluster/test_scheduling_vs_kube_scheduler.py holds these functions
to the real scheduler's decisions on generated nodes and pods.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kvtier import quantity
from kvtier.shapes import mapping, sequence

FILTERED_EFFECTS = ("NoSchedule", "NoExecute")  # TaintToleration's filter ignores PreferNoSchedule
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
# Added to every pod at admission (plugin/pkg/admission/defaulttolerationseconds) unless one of its own
# tolerations already covers that key (or every key) for NoExecute (or every effect).
ADMISSION_TOLERATIONS: list[dict[str, Any]] = [
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
]
# The DaemonSet controller adds these to its pods (pkg/controller/daemon/util
# AddOrUpdateDaemonPodTolerations).
DAEMON_TOLERATIONS: list[dict[str, Any]] = [
    {"key": f"node.kubernetes.io/{key}", "operator": "Exists", "effect": effect}
    for key, effect in (
        ("not-ready", "NoExecute"),
        ("unreachable", "NoExecute"),
        ("disk-pressure", "NoSchedule"),
        ("memory-pressure", "NoSchedule"),
        ("pid-pressure", "NoSchedule"),
        ("unschedulable", "NoSchedule"),
    )
]
DAEMON_HOST_NETWORK_TOLERATION = {
    "key": "node.kubernetes.io/network-unavailable",
    "operator": "Exists",
    "effect": "NoSchedule",
}


@dataclass(frozen=True)
class Refusal:
    """Why one node cannot take the pod: the plugin and what it found."""

    plugin: str  # TaintToleration | NodeAffinity | NodeResourcesFit | NodeUnschedulable
    detail: str


def tolerates(toleration: dict[str, Any], taint: dict[str, Any]) -> bool:
    """core/v1 Toleration.ToleratesTaint: an empty effect matches every effect, an empty key with Exists
    every key; Equal (or no operator) compares the values."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def untolerated(tolerations: list[dict[str, Any]], taints: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The taints a scheduler filter holds against the pod: NoSchedule and NoExecute ones no toleration
    matches."""
    return [
        t
        for t in taints
        if t.get("effect") in FILTERED_EFFECTS and not any(tolerates(tol, t) for tol in tolerations)
    ]


def taint_text(taint: dict[str, Any]) -> str:
    value = taint.get("value")
    return f"{taint.get('key')}{'=' + str(value) if value else ''}:{taint.get('effect')}"


def _int(text: Any) -> int | None:
    try:
        return int(str(text), 10)
    except ValueError:
        return None


def _requirement(labels: dict[str, str], expression: dict[str, Any]) -> bool:
    """One NodeSelectorRequirement against a node's labels (In, NotIn, Exists, DoesNotExist, Gt, Lt)."""
    key, operator = str(expression.get("key")), expression.get("operator")
    values = [str(v) for v in sequence(expression.get("values"))]
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(values) == 1:
        have, bound = _int(labels[key]), _int(values[0])
        if have is None or bound is None:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def _field_requirement(name: str, expression: dict[str, Any]) -> bool:
    """matchFields: only metadata.name, with In or NotIn."""
    if expression.get("key") != "metadata.name":
        return False
    values = [str(v) for v in sequence(expression.get("values"))]
    if expression.get("operator") == "In":
        return name in values
    if expression.get("operator") == "NotIn":
        return name not in values
    return False


def _labels(node: dict[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in mapping(mapping(node.get("metadata")).get("labels")).items()}


def _term(node: dict[str, Any], labels: dict[str, str], term: dict[str, Any]) -> bool:
    """A NodeSelectorTerm: every expression and field holds; an empty term matches no node."""
    expressions, fields = sequence(term.get("matchExpressions")), sequence(term.get("matchFields"))
    if not expressions and not fields:
        return False
    name = str(mapping(node.get("metadata")).get("name", ""))
    return all(_requirement(labels, e) for e in expressions) and all(
        _field_requirement(name, f) for f in fields
    )


def affinity_refusal(spec: dict[str, Any], node: dict[str, Any]) -> str:
    """Why the node does not match the pod's nodeSelector or required node affinity, or ''."""
    labels = _labels(node)
    for key, value in mapping(spec.get("nodeSelector")).items():
        if labels.get(str(key)) != str(value):
            return f"nodeSelector {key}={value} (node has {labels.get(str(key), 'no such label')})"
    required = mapping(
        mapping(mapping(spec.get("affinity")).get("nodeAffinity")).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
    )
    if "nodeSelectorTerms" in required:
        terms = sequence(required.get("nodeSelectorTerms"))
        if not any(_term(node, labels, mapping(t)) for t in terms):
            return "no term of the required node affinity matches its labels"
    return ""


def _resources(container: dict[str, Any]) -> dict[str, Fraction]:
    """A container's requests after the API server's defaulting: a limit without a request is the request."""
    resources = mapping(container.get("resources"))
    merged = {**mapping(resources.get("limits")), **mapping(resources.get("requests"))}
    out = {}
    for name, value in merged.items():
        parsed = quantity.try_parse(value)
        if parsed is not None:
            out[str(name)] = parsed
    return out


def _add(total: dict[str, Fraction], more: dict[str, Fraction]) -> dict[str, Fraction]:
    return {k: total.get(k, Fraction(0)) + more.get(k, Fraction(0)) for k in total.keys() | more.keys()}


def _max(a: dict[str, Fraction], b: dict[str, Fraction]) -> dict[str, Fraction]:
    return {k: max(a.get(k, Fraction(0)), b.get(k, Fraction(0))) for k in a.keys() | b.keys()}


def pod_requests(spec: dict[str, Any]) -> dict[str, Fraction]:
    """The pod's effective requests (component-helpers resource.PodRequests): containers and restartable
    (sidecar) init containers add up; each ordinary init container runs alone beside the sidecars started
    before it; the larger of the two per resource; plus spec.overhead."""
    total: dict[str, Fraction] = {}
    for c in sequence(spec.get("containers")):
        total = _add(total, _resources(mapping(c)))
    sidecars: dict[str, Fraction] = {}
    peak: dict[str, Fraction] = {}  # the most any step of the init sequence holds at once
    for c in sequence(spec.get("initContainers")):
        c = mapping(c)
        if c.get("restartPolicy") == "Always":
            sidecars = _add(sidecars, _resources(c))
            step = sidecars
        else:
            step = _add(sidecars, _resources(c))
        peak = _max(peak, step)
    total = _max(_add(total, sidecars), peak)
    overhead = {
        str(k): v for k, v in ((k, quantity.try_parse(v)) for k, v in mapping(spec.get("overhead")).items())
    }
    return _add(total, {k: v for k, v in overhead.items() if v is not None})


def resource_refusal(requests: dict[str, Fraction], node: dict[str, Any]) -> str:
    """The first resource the node's allocatable cannot hold even empty, or ''."""
    allocatable = mapping(mapping(node.get("status")).get("allocatable"))
    if (quantity.try_parse(allocatable.get("pods", "0")) or 0) < 1:
        return "allocatable pods 0"
    for name in sorted(requests):
        wanted = requests[name]
        if wanted <= 0:
            continue
        have = quantity.try_parse(allocatable.get(name, "0")) or Fraction(0)
        if wanted > have:
            return f"requests {name} {_show(wanted)}, allocatable {allocatable.get(name, 0)}"
    return ""


def _show(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{float(value):g}"


def tolerations_of(spec: dict[str, Any], daemon: bool = False) -> list[dict[str, Any]]:
    """The pod's tolerations as the scheduler sees them: its own, plus what admission (and, for a
    DaemonSet's pods, the DaemonSet controller) adds."""
    own = [mapping(t) for t in sequence(spec.get("tolerations"))]
    added = list(DAEMON_TOLERATIONS) if daemon else []
    if daemon and spec.get("hostNetwork"):
        added.append(DAEMON_HOST_NETWORK_TOLERATION)
    added += [
        t
        for t in ADMISSION_TOLERATIONS
        if not any(
            (o.get("key") or t["key"]) == t["key"] and (o.get("effect") or "NoExecute") == "NoExecute"
            for o in own
        )
    ]
    return own + added


def refusal(spec: dict[str, Any], node: dict[str, Any], daemon: bool = False) -> Refusal | None:
    """Why kube-scheduler would never place a pod of this spec on this node, or None when it could.
    The scheduler runs every filter; the node's labels are asked first so that a node the pods never
    select is reported as such (validate tells "no such node" from "no node will take them")."""
    node_spec = mapping(node.get("spec"))
    tolerations = tolerations_of(spec, daemon)
    taints = [mapping(t) for t in sequence(node_spec.get("taints"))]
    why = affinity_refusal(spec, node)
    if why:
        return Refusal("NodeAffinity", why)
    if node_spec.get("unschedulable") and untolerated(tolerations, [UNSCHEDULABLE_TAINT]):
        return Refusal("NodeUnschedulable", "the node is cordoned (spec.unschedulable)")
    left = untolerated(tolerations, taints)
    if left:
        return Refusal(
            "TaintToleration", "taint " + ", ".join(taint_text(t) for t in left) + " not tolerated"
        )
    why = resource_refusal(pod_requests(spec), node)
    if why:
        return Refusal("NodeResourcesFit", why)
    return None


__all__ = [
    "Refusal",
    "affinity_refusal",
    "pod_requests",
    "refusal",
    "resource_refusal",
    "taint_text",
    "tolerates",
    "tolerations_of",
    "untolerated",
]
