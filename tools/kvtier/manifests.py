"""Rendered Kubernetes objects as every step reads them: which kinds carry pods and where their pod spec
is, the containers of a pod spec, and how a finding names an object. Forgiving like shapes.py: a field of
the wrong type reads as absent, since the schemas, not these readers, report it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

# Where each kind that makes pods keeps its pod spec, as a rendered field path.
POD_SPEC = {
    "Pod": "spec",
    "Deployment": "spec.template.spec",
    "StatefulSet": "spec.template.spec",
    "DaemonSet": "spec.template.spec",
    "ReplicaSet": "spec.template.spec",
    "ReplicationController": "spec.template.spec",
    "Job": "spec.template.spec",
    "CronJob": "spec.jobTemplate.spec.template.spec",
}
# The kinds whose pods run until replaced (a Job's and a bare Pod's end).
LONG_RUNNING = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController"}


def subject(m: dict[str, Any]) -> str:
    """Kind/name, as findings and kubectl name an object."""
    return f"{m.get('kind')}/{(m.get('metadata') or {}).get('name')}"


def at(tree: Any, dotted: str) -> Any:
    """The value at a dotted field path (`spec.template.spec`), None where a step is not a mapping."""
    for step in dotted.split("."):
        tree = tree.get(step) if isinstance(tree, dict) else None
    return tree


def pod_spec(m: Any) -> dict[str, Any] | None:
    """The pod spec of an object that makes pods, else None."""
    where = POD_SPEC.get(str(m.get("kind"))) if isinstance(m, dict) else None
    spec = at(m, where) if where else None
    return spec if isinstance(spec, dict) else None


def pod_templates(manifests: Iterable[Any]) -> Iterator[tuple[dict[str, Any], str, dict[str, Any]]]:
    """(manifest, field path of its pod spec, pod spec) of every object that makes pods."""
    for m in manifests:
        spec = pod_spec(m)
        if spec is not None:
            yield m, POD_SPEC[m["kind"]], spec


def containers(spec: dict[str, Any]) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """(field, index, container) of every init container, then every container, of a pod spec."""
    for field in ("initContainers", "containers"):
        listed = spec.get(field)
        for i, c in enumerate(listed if isinstance(listed, list) else []):
            if isinstance(c, dict):
                yield field, i, c


def container_paths(spec: dict[str, Any], where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(rendered field path, container) of every container of the pod spec at `where`."""
    for field, i, c in containers(spec):
        yield f"{where}.{field}[{i}]", c
