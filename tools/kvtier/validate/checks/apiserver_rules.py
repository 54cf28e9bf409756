"""What the API server's own validation refuses beyond the OpenAPI schemas, as rules over the rendered
objects, so a run without a server (the default) refuses the same objects.

The published schemas carry types, enums and formats; the cross-field rules live in Go, in
k8s.io/kubernetes pkg/apis/*/validation (read at the pinned control plane's version). Each rule here is one
of those functions, cited in its reason. tests/cluster/test_apiserver_rules.py generates objects across each
rule's fields and requires the same verdict as the real API server's dry run.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any

from kvtier import quantity
from kvtier.manifests import container_paths, pod_templates, subject
from kvtier.shapes import mapping, sequence
from kvtier.validate.rules import Hit, ManifestsContext, rule

ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")


@rule(
    "kube-escalation-contradiction",
    scope="manifests",
    reason="the API server refuses a container whose securityContext sets allowPrivilegeEscalation false "
    "with privileged true, or with CAP_SYS_ADMIN in capabilities.add: each implies escalation "
    "(pkg/apis/core/validation ValidateSecurityContext). Maps merge, so a values file that adds "
    "`privileged: true` to a chart's restricted securityContext keeps its `allowPrivilegeEscalation: false`",
    remedy="set allowPrivilegeEscalation: true (or drop it) beside privileged: true / CAP_SYS_ADMIN, or drop "
    "privileged",
)
def escalation_contradiction(ctx: ManifestsContext) -> Iterator[Hit]:
    for m, where, spec in pod_templates(ctx.manifests):
        for path, c in container_paths(spec, where):
            sc = mapping(c.get("securityContext"))
            if sc.get("allowPrivilegeEscalation") is not False:
                continue
            why = []
            if sc.get("privileged") is True:
                why.append("privileged: true")
            if "CAP_SYS_ADMIN" in sequence(mapping(sc.get("capabilities")).get("add")):
                why.append("capabilities.add CAP_SYS_ADMIN")
            if why:
                yield Hit(
                    f"container {c.get('name')}: allowPrivilegeEscalation false with {' and '.join(why)}: "
                    "the API server refuses it (each implies privilege escalation)",
                    subject=subject(m),
                    manifest_path=f"{path}.securityContext",
                )


@rule(
    "kube-volume-mounts",
    scope="manifests",
    reason="the API server refuses a pod whose volumes repeat a name, or a container that mounts a volume "
    "the pod does not declare or mounts two volumes at one path (pkg/apis/core/validation validateVolumes, "
    "ValidateVolumeMounts: 'must be unique'; a StatefulSet's claim templates count as volumes), e.g. "
    "an L2 mountPath of /dev/shm beside the engine's shared-memory volume",
    remedy="give the mount a path no other mount of the container uses, and mount only declared volumes",
)
def volume_mounts(ctx: ManifestsContext) -> Iterator[Hit]:
    for m, where, spec in pod_templates(ctx.manifests):
        declared: set[Any] = set()
        for i, volume in enumerate(sequence(spec.get("volumes"))):
            name = mapping(volume).get("name")
            if name in declared:
                yield Hit(
                    f"volume {name!r} is declared twice: the API server refuses the pod",
                    subject=subject(m),
                    manifest_path=f"{where}.volumes[{i}].name",
                )
            declared.add(name)
        if m.get("kind") == "StatefulSet":  # each claim template is a volume of its pods
            templates = sequence(mapping(m.get("spec")).get("volumeClaimTemplates"))
            declared.update(mapping(mapping(t).get("metadata")).get("name") for t in templates)
        for path, c in container_paths(spec, where):
            seen: set[Any] = set()
            for i, mount in enumerate(sequence(c.get("volumeMounts"))):
                mount = mapping(mount)
                at = f"{path}.volumeMounts[{i}]"
                if mount.get("name") not in declared:
                    yield Hit(
                        f"container {c.get('name')} mounts volume {mount.get('name')!r}, which the pod does "
                        "not declare: the API server refuses the pod",
                        subject=subject(m),
                        manifest_path=f"{at}.name",
                    )
                mount_path = mount.get("mountPath")
                if mount_path in seen:
                    yield Hit(
                        f"container {c.get('name')} mounts two volumes at {mount_path!r}: the API server "
                        "refuses the pod (a mountPath must be unique in a container)",
                        subject=subject(m),
                        manifest_path=f"{at}.mountPath",
                    )
                seen.add(mount_path)


@rule(
    "kube-hostnetwork-ports",
    scope="manifests",
    reason="on the host's network a container's hostPort must equal its containerPort: the API server "
    "refuses any other (pkg/apis/core/validation validateHostNetwork)",
    remedy="drop hostPort, or set it to the containerPort, when hostNetwork is true",
)
def hostnetwork_ports(ctx: ManifestsContext) -> Iterator[Hit]:
    for m, where, spec in pod_templates(ctx.manifests):
        if spec.get("hostNetwork") is not True:
            continue
        for path, c in container_paths(spec, where):
            for i, port in enumerate(sequence(c.get("ports"))):
                port = mapping(port)
                host = port.get("hostPort")
                if host not in (None, 0) and host != port.get("containerPort"):
                    yield Hit(
                        f"container {c.get('name')}: hostPort {host} differs from containerPort "
                        f"{port.get('containerPort')} on the host's network: the API server refuses it",
                        subject=subject(m),
                        manifest_path=f"{path}.ports[{i}].hostPort",
                    )


ENV_SOURCES = ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef", "fileKeyRef")


def _env_problems(var: dict[str, Any]) -> Iterator[tuple[str, str]]:
    name = var.get("name")
    if isinstance(name, str) and (not name or any(not (" " <= ch <= "~") or ch == "=" for ch in name)):
        yield ".name", f"is named {name!r}: a name must be printable ASCII without '='"
    source = var.get("valueFrom")
    if source is None:
        return
    sources = [key for key in ENV_SOURCES if mapping(source).get(key) is not None]
    if not sources:
        yield ".valueFrom", "has a valueFrom that names no source (secretKeyRef, configMapKeyRef, ...)"
    elif var.get("value") not in (None, ""):
        yield ".valueFrom", "has both a value and a valueFrom"
    elif len(sources) > 1:
        yield ".valueFrom", f"reads from {len(sources)} sources at once ({', '.join(sources)})"


@rule(
    "kube-env-vars",
    scope="manifests",
    reason="the API server refuses an environment variable whose name is empty, has '=' or a character "
    "outside printable ASCII (the relaxed rule, GA in 1.34), whose valueFrom names no source or several, "
    "or that has both a value and a valueFrom (pkg/apis/core/validation ValidateEnv, "
    "validateEnvVarValueFrom); and server-side apply (Helm 4) refuses two variables of one name, env being "
    "a list keyed by name (x-kubernetes-list-map-keys); extraEnv items reach the pods as written, "
    "except a PYTHONPATH, which the chart puts behind the mount of its own Python modules when it mounts "
    "them",
    remedy="give each variable a plain name used once per container (drop an extraEnv item that repeats one "
    "the chart sets) and either a value or a valueFrom with exactly one source",
)
def env_vars(ctx: ManifestsContext) -> Iterator[Hit]:
    for m, where, spec in pod_templates(ctx.manifests):
        for path, c in container_paths(spec, where):
            seen: set[Any] = set()
            for i, var in enumerate(sequence(c.get("env"))):
                name = mapping(var).get("name")
                if name in seen:
                    yield Hit(
                        f"container {c.get('name')}: env[{i}] repeats {name!r}: Helm 4 applies server-side, "
                        "where env is a list keyed by name, and the API server refuses the duplicate "
                        "(Helm 3 installs it and the container sees only the last value)",
                        subject=subject(m),
                        manifest_path=f"{path}.env[{i}].name",
                    )
                seen.add(name)
                for field, problem in _env_problems(mapping(var)):
                    yield Hit(
                        f"container {c.get('name')}: env[{i}] {problem}: the API server refuses the pod",
                        subject=subject(m),
                        manifest_path=f"{path}.env[{i}]{field}",
                    )


def _claim_specs(m: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(field path, claim spec) of every claim an object carries: its own, a StatefulSet's templates,
    a pod's ephemeral volumes."""
    if m.get("kind") == "PersistentVolumeClaim":
        yield "spec", mapping(m.get("spec"))
    if m.get("kind") == "StatefulSet":
        for i, template in enumerate(sequence(mapping(m.get("spec")).get("volumeClaimTemplates"))):
            yield f"spec.volumeClaimTemplates[{i}].spec", mapping(mapping(template).get("spec"))


def _ephemeral_claims(ctx: ManifestsContext) -> Iterator[tuple[dict[str, Any], str, dict[str, Any]]]:
    for m, where, spec in pod_templates(ctx.manifests):
        for i, volume in enumerate(sequence(spec.get("volumes"))):
            template = mapping(mapping(mapping(volume).get("ephemeral")).get("volumeClaimTemplate"))
            if template:
                at = f"{where}.volumes[{i}].ephemeral.volumeClaimTemplate.spec"
                yield m, at, mapping(template.get("spec"))


def _claim_problems(spec: dict[str, Any]) -> Iterator[tuple[str, str]]:
    modes = sequence(spec.get("accessModes"))
    if not modes:
        yield "accessModes", "has no access mode (at least one is required)"
    for mode in modes:
        if mode not in ACCESS_MODES:
            yield "accessModes", f"has access mode {mode!r}, not one of {', '.join(ACCESS_MODES)}"
    if "ReadWriteOncePod" in modes and any(mode in ACCESS_MODES[:3] for mode in modes):
        yield "accessModes", "combines ReadWriteOncePod with another access mode"
    requests = mapping(mapping(spec.get("resources")).get("requests"))
    size = quantity.try_parse(requests.get("storage")) if "storage" in requests else None
    if "storage" not in requests:
        yield "resources.requests", "requests no storage"
    elif size is not None and size <= 0:
        yield "resources.requests.storage", f"requests {requests['storage']!r} of storage (must be above 0)"


@rule(
    "kube-claim-spec",
    scope="manifests",
    reason="the API server refuses a claim with no access mode, an unknown one, ReadWriteOncePod beside "
    "another, or a storage request that is missing or not above zero (pkg/apis/core/validation "
    "ValidatePersistentVolumeClaimSpec); a StatefulSet then creates no claim and no pod starts",
    remedy="list one access mode (ReadWriteOncePod alone) and a storage size above zero",
)
def claim_spec(ctx: ManifestsContext) -> Iterator[Hit]:
    claims = [(m, path, spec) for m in ctx.manifests if isinstance(m, dict) for path, spec in _claim_specs(m)]
    for m, path, spec in [*claims, *_ephemeral_claims(ctx)]:
        for field, problem in _claim_problems(spec):
            yield Hit(
                f"the claim {problem}: the API server refuses it",
                subject=subject(m),
                manifest_path=f"{path}.{field}",
            )


def _network(text: Any) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(str(text), strict=False)
    except ValueError:
        return None  # not a CIDR: the schema's format check and the server say so


def _peer_problems(peer: dict[str, Any]) -> Iterator[tuple[str, str]]:
    present = [key for key in ("podSelector", "namespaceSelector", "ipBlock") if peer.get(key) is not None]
    if not present:
        yield "", "names no peer (podSelector, namespaceSelector or ipBlock)"
    elif "ipBlock" in present and len(present) > 1:
        yield "", "combines ipBlock with a selector (an ipBlock peer stands alone; list them as two peers)"
    block = mapping(peer.get("ipBlock"))
    cidr = _network(block.get("cidr"))
    for i, text in enumerate(sequence(block.get("except")) if cidr else []):
        inner = _network(text)
        if inner is not None and (
            inner.version != cidr.version  # type: ignore[union-attr]
            or inner.network_address not in cidr  # type: ignore[operator]
            or inner.prefixlen <= cidr.prefixlen  # type: ignore[union-attr]
        ):
            yield f".ipBlock.except[{i}]", f"excepts {text!r}, not a strict subset of {block.get('cidr')!r}"


def _port_problems(port: dict[str, Any]) -> Iterator[tuple[str, str]]:
    end = port.get("endPort")
    if end is None:
        return
    number = port.get("port")
    if number is None:
        yield ".endPort", "sets endPort without port"
    elif not isinstance(number, int):
        yield ".endPort", f"sets endPort with a named port {number!r}"
    elif isinstance(end, int) and end < number:
        yield ".endPort", f"sets endPort {end} below port {number}"


@rule(
    "kube-networkpolicy-peers",
    scope="manifests",
    reason="the API server refuses a NetworkPolicy peer that names nothing or combines ipBlock with a "
    "selector, an ipBlock.except that is not a strict subset of its cidr, and an endPort without a numeric "
    "port at or below it (pkg/apis/networking/validation ValidateNetworkPolicyPeer, ValidateIPBlock, "
    "ValidateNetworkPolicyPort)",
    remedy="write an ipBlock as a peer of its own (a list item), except only ranges inside its cidr, and "
    "give endPort a numeric port",
)
def networkpolicy_peers(ctx: ManifestsContext) -> Iterator[Hit]:
    for m in ctx.manifests:
        if not isinstance(m, dict) or m.get("kind") != "NetworkPolicy":
            continue
        spec = mapping(m.get("spec"))
        for direction, peers_key in (("ingress", "from"), ("egress", "to")):
            for i, item in enumerate(sequence(spec.get(direction))):
                item = mapping(item)
                at = f"spec.{direction}[{i}]"
                for j, peer in enumerate(sequence(item.get(peers_key))):
                    for field, problem in _peer_problems(mapping(peer)):
                        yield Hit(
                            f"{direction} rule {i}, peer {j} {problem}: the API server refuses the policy",
                            subject=subject(m),
                            manifest_path=f"{at}.{peers_key}[{j}]{field}",
                        )
                for j, port in enumerate(sequence(item.get("ports"))):
                    for field, problem in _port_problems(mapping(port)):
                        yield Hit(
                            f"{direction} rule {i}, port {j} {problem}: the API server refuses the policy",
                            subject=subject(m),
                            manifest_path=f"{at}.ports[{j}]{field}",
                        )


__all__: list[str] = []
