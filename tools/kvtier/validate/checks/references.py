"""With `--context`: the Secrets, ConfigMaps and claims the rendered pods read, looked up in the release's
namespace on that cluster.

The API server admits a pod whose Secret does not exist; the kubelet then cannot build the container
(CreateContainerConfigError: secret "x" not found, or couldn't find key y) or mount its volume, and the pod
waits for ever. Only the cluster knows what exists, so this runs only when a cluster is named; objects the
release renders itself, and references marked `optional: true`, are not asked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kvtier.cluster.common.rest import ApiException, Rest
from kvtier.manifests import container_paths, pod_templates, subject
from kvtier.shapes import mapping, sequence
from kvtier.validate.findings import Finding, Severity

REFERENCES = "cluster references"  # the check's row in the summary
PATHS = {
    "Secret": "secrets",
    "ConfigMap": "configmaps",
    "PersistentVolumeClaim": "persistentvolumeclaims",
}


@dataclass(frozen=True)
class Reference:
    kind: str  # Secret | ConfigMap | PersistentVolumeClaim
    name: str
    key: str | None  # a data key the pod reads, when it names one
    subject: str  # the manifest that reads it
    path: str  # the rendered field that names it


def _ref(kind: str, source: Any, name_field: str, key: Any, who: str, at: str) -> Iterator[Reference]:
    """The reference a selector or volume source makes, unless it is optional or names nothing."""
    source = mapping(source)
    name = source.get(name_field)
    if isinstance(name, str) and name and source.get("optional") is not True:
        yield Reference(kind, name, key if isinstance(key, str) else None, who, f"{at}.{name_field}")


def _pod_references(spec: dict[str, Any], where: str, who: str) -> Iterator[Reference]:
    for i, volume in enumerate(sequence(spec.get("volumes"))):
        volume, at = mapping(volume), f"{where}.volumes[{i}]"
        for kind, field, name_field in (
            ("Secret", "secret", "secretName"),
            ("ConfigMap", "configMap", "name"),
        ):
            source = volume.get(field)
            keys = [mapping(item).get("key") for item in sequence(mapping(source).get("items"))]
            for key in keys or [None]:
                yield from _ref(kind, source, name_field, key, who, f"{at}.{field}")
        claim = volume.get("persistentVolumeClaim")
        yield from _ref("PersistentVolumeClaim", claim, "claimName", None, who, f"{at}.persistentVolumeClaim")
    for path, c in container_paths(spec, where):
        for i, var in enumerate(sequence(c.get("env"))):
            source, at = mapping(mapping(var).get("valueFrom")), f"{path}.env[{i}].valueFrom"
            for kind, field in (("Secret", "secretKeyRef"), ("ConfigMap", "configMapKeyRef")):
                ref = source.get(field)
                yield from _ref(kind, ref, "name", mapping(ref).get("key"), who, f"{at}.{field}")
        for i, source in enumerate(sequence(c.get("envFrom"))):
            for kind, field in (("Secret", "secretRef"), ("ConfigMap", "configMapRef")):
                yield from _ref(
                    kind, mapping(source).get(field), "name", None, who, f"{path}.envFrom[{i}].{field}"
                )


def references(manifests: list[dict[str, Any]]) -> list[Reference]:
    """What the pod templates read from the namespace (env and envFrom sources, secret and configMap
    volumes with the keys their items name, claims), less what the release renders itself."""
    found = [
        ref for m, where, spec in pod_templates(manifests) for ref in _pod_references(spec, where, subject(m))
    ]
    rendered = {
        (m.get("kind"), mapping(m.get("metadata")).get("name")) for m in manifests if isinstance(m, dict)
    }
    # A StatefulSet's pods get claims named <template>-<set>-<ordinal>, made by its controller.
    templated = tuple(
        f"{mapping(t.get('metadata')).get('name')}-{mapping(m.get('metadata')).get('name')}-"
        for m in manifests
        if isinstance(m, dict) and m.get("kind") == "StatefulSet"
        for t in sequence(mapping(m.get("spec")).get("volumeClaimTemplates"))
        if isinstance(t, dict)
    )
    return [
        r
        for r in found
        if (r.kind, r.name) not in rendered
        and not (r.kind == "PersistentVolumeClaim" and r.name.startswith(templated))
    ]


def check(
    rest: Rest, namespace: str, manifests: list[dict[str, Any]], file: str, where: str
) -> list[Finding]:
    """A finding per reference the namespace cannot satisfy: the object or the key is missing, or
    kvtier may not read it (a warning: it could not check)."""
    findings: list[Finding] = []
    fetched: dict[tuple[str, str], dict[str, Any] | str | None] = {}
    for ref in references(manifests):
        if (ref.kind, ref.name) not in fetched:
            try:
                fetched[ref.kind, ref.name] = rest.find(
                    f"/api/v1/namespaces/{namespace}/{PATHS[ref.kind]}/{ref.name}"
                )
            except ApiException as error:
                fetched[ref.kind, ref.name] = f"{error.status} {error.reason}"
        found = fetched[ref.kind, ref.name]
        if isinstance(found, str):
            message = f"{ref.kind} {ref.name!r} could not be read in namespace {namespace!r} ({found})"
            findings.append(_finding(ref, file, message, "warning"))
        elif found is None:
            stuck = "Pending" if ref.kind == "PersistentVolumeClaim" else "in CreateContainerConfigError"
            message = (
                f"{ref.kind} {ref.name!r} does not exist in namespace {namespace!r} on {where}: the pods "
                f"reading it stay {stuck}"
            )
            findings.append(_finding(ref, file, message, "error"))
        elif ref.key is not None:
            keys = set(mapping(found.get("data"))) | set(mapping(found.get("binaryData")))
            if ref.key not in keys:
                message = (
                    f"{ref.kind} {ref.name!r} in namespace {namespace!r} has no key {ref.key!r} "
                    f"(it has {', '.join(sorted(keys)) or 'none'}): the kubelet cannot build the container"
                )
                findings.append(_finding(ref, file, message, "error"))
    return findings


def _finding(ref: Reference, file: str, message: str, severity: Severity) -> Finding:
    return Finding(
        REFERENCES,
        "cluster.reference",
        message,
        file,
        path=ref.path,
        subject=ref.subject,
        severity=severity,
        suggestion=f"create the {ref.kind} in the release's namespace first (or name one that exists there)"
        if severity == "error"
        else "give the credentials get on that kind in the namespace, or check it by hand",
    )


__all__ = ["REFERENCES", "Reference", "check", "references"]
