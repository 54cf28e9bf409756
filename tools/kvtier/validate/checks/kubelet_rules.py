"""Rules over the rendered pod templates for what the API server admits but the kubelet or the container
runtime then refuses or runs wrong: byte quantities that are not a whole number of bytes, and a non-root
policy contradicted by the UID the same security context asks for.

Each finding names the rendered field (`spec.template.spec.containers[0]...`) so that provenance traces
it back to the values key that produced it.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import Any

from kvtier import quantity
from kvtier.manifests import at, container_paths, pod_templates, subject
from kvtier.validate.rules import Hit, ManifestsContext, rule

MIB = 1 << 20
_BYTES = ("memory", "ephemeral-storage")


def byte_resource(name: Any) -> bool:
    """A resource counted in bytes: memory, ephemeral-storage and hugepages-<page size>."""
    return isinstance(name, str) and (name in _BYTES or name.startswith("hugepages-"))


def _suggest(value: Fraction, written: Any) -> str:
    """What the user most likely meant: a milli suffix read as mega, else the bytes rounded up."""
    text = str(written)
    if text.endswith("m") and text[:-1].replace(".", "", 1).isdigit():
        return f"{text[:-1]}Mi (or {text[:-1]}M)"
    return f"{-(-value // 1)} or a Mi/Gi quantity"


def _bytes(n: int) -> str:
    return "1 byte" if n == 1 else f"{n} bytes"


def _fractional(resources: Any, path: str, who: str, m: dict[str, Any]) -> Iterator[Hit]:
    if not isinstance(resources, dict):
        return
    for kind in ("limits", "requests"):
        block = resources.get(kind)
        for name, written in block.items() if isinstance(block, dict) else []:
            if not byte_resource(name):
                continue
            value = quantity.try_parse(written)
            if value is None or value.denominator == 1:
                continue  # not a quantity (the API server refuses it) or a whole number of bytes
            # A limit under a mebibyte cannot start any process (the runtime's init is OOM-killed, the
            # kubelet evicts on the first byte written); otherwise the kubelet merely rounds up.
            broken = kind == "limits" and value < MIB
            yield Hit(
                f"{who}: resources.{kind}.{name} {written!r} is {float(value):.6g} bytes, not a whole "
                f"number of bytes (a lowercase m is milli, not mega); the kubelet rounds it up to "
                f"{_bytes(-(-value // 1))}. Write {_suggest(value, written)}",
                subject=subject(m),
                manifest_path=f"{path}.{kind}.{name}",
                severity="error" if broken else "warning",
            )


@rule(
    "kube-byte-quantity-whole",
    scope="manifests",
    reason="memory, ephemeral-storage and hugepages-* are counted in bytes, and a Kubernetes quantity's "
    "lowercase m is milli: `512m` is 0.512 bytes. The API server admits it (with only a warning, "
    "k8s.io/kubernetes pkg/api/pod/warnings.go 'fractional byte value ... is invalid, must be an "
    "integer'); the kubelet rounds it up (resource.Quantity.Value), so a limit of a few bytes kills the "
    "container at start and a request reserves nothing (Kubernetes docs, 'Resource Management for Pods: "
    "Meaning of memory')",
    remedy="write byte quantities with a binary or decimal suffix (512Mi, 2Gi, 512M) or as a whole number "
    "of bytes; never with m",
)
def byte_quantities_whole(ctx: ManifestsContext) -> Iterator[Hit]:
    for m, where, spec in pod_templates(ctx.manifests):
        yield from _fractional(spec.get("resources"), f"{where}.resources", "pod-level resources", m)
        for path, c in container_paths(spec, where):
            yield from _fractional(c.get("resources"), f"{path}.resources", f"container {c.get('name')}", m)
    for m in ctx.manifests:
        # The HyperPod operator renders a Deployment from the endpoint's worker, resources unchanged.
        if isinstance(m, dict) and m.get("kind") == "InferenceEndpointConfig":
            worker = at(m, "spec.worker")
            if isinstance(worker, dict):
                yield from _fractional(worker.get("resources"), "spec.worker.resources", "worker", m)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _context(tree: dict[str, Any]) -> dict[str, Any]:
    sc = tree.get("securityContext")
    return sc if isinstance(sc, dict) else {}


def effective(key: str, spec: dict[str, Any], where: str, c: dict[str, Any], path: str) -> tuple[Any, str]:
    """A security context field as the kubelet sees it for a container (the container's own setting, else
    the pod's), and the rendered field it comes from."""
    own = _context(c)
    if own.get(key) is not None:
        return own[key], f"{path}.securityContext.{key}"
    return _context(spec).get(key), f"{where}.securityContext.{key}"


def _level(field: str, container: str) -> str:
    return "its securityContext" if field.startswith(container + ".") else "the pod's securityContext"


@rule(
    "kube-runasnonroot-root-uid",
    scope="manifests",
    reason="the kubelet merges the pod's securityContext into each container's, field by field (container "
    "settings win, k8s.io/kubernetes pkg/securitycontext DetermineEffectiveSecurityContext) and refuses to "
    "create a container whose effective runAsNonRoot is true and runAsUser is 0 "
    "(pkg/kubelet/kuberuntime/security_context_others.go verifyRunAsNonRoot: \"container's runAsUser "
    'breaks non-root policy"): the API server admits the pod, which then stays in '
    "CreateContainerConfigError",
    remedy="run as a non-zero UID (and give it the files it needs with fsGroup or the volume's owner), or "
    "set runAsNonRoot: false where the container really must run as root",
)
def runasnonroot_root_uid(ctx: ManifestsContext) -> Iterator[Hit]:
    for m, where, spec in pod_templates(ctx.manifests):
        if at(spec, "os.name") == "windows":
            continue  # Windows checks runAsUserName instead (security_context_windows.go)
        for path, c in container_paths(spec, where):
            nonroot, nonroot_at = effective("runAsNonRoot", spec, where, c, path)
            uid, uid_at = effective("runAsUser", spec, where, c, path)
            if nonroot is True and _int(uid) == 0:
                yield Hit(
                    f"container {c.get('name')}: runAsUser 0 ({_level(uid_at, path)}) with runAsNonRoot "
                    f"true ({_level(nonroot_at, path)}): the kubelet refuses to start it "
                    "(CreateContainerConfigError: container's runAsUser breaks non-root policy); use a "
                    "non-zero runAsUser, or runAsNonRoot false if it must run as root",
                    subject=subject(m),
                    manifest_path=uid_at,
                )


__all__ = ["byte_resource", "effective"]
