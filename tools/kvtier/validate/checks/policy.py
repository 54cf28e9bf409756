"""Rules over the rendered manifests: images, resources, security, probes, Pod Security, RBAC, secrets."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from kvtier.images import reference
from kvtier.images.reference import is_pinned
from kvtier.manifests import LONG_RUNNING, containers, pod_templates, subject
from kvtier.validate.checks.secret_rules import is_literal
from kvtier.validate.findings import POLICY
from kvtier.validate.rules import Hit, ManifestsContext, rule

_SECRET_ENV = re.compile(r"(TOKEN|PASSWORD|PASSWD|API_KEY|APIKEY|SECRET_KEY|ACCESS_KEY|CLIENT_SECRET)$")


def each_container(ctx: ManifestsContext) -> Iterator[tuple[dict[str, Any], str, dict[str, Any]]]:
    """(manifest, field, container) of every init container and container the render's pods run."""
    for m, _, spec in pod_templates(ctx.manifests):
        for field, _, c in containers(spec):
            yield m, field, c


def container_hit(m: dict[str, Any], field: str, c: dict[str, Any], what: str, under: str = "") -> Hit:
    """A finding on container `c` (named by its name, as provenance reads it), at `under` inside it."""
    name = c.get("name")
    return Hit(f"container {name} {what}", subject=subject(m), manifest_path=f"spec.{field}[{name}]{under}")


@rule(
    "image-no-latest",
    scope="manifests",
    check_name=POLICY,
    reason="`latest` (or no tag) moves under you: replicas end up on different LMCache/vLLM builds",
    remedy="pin every image to a version tag or a digest",
)
def no_latest(ctx: ManifestsContext) -> Iterator[Hit]:
    for m, field, c in each_container(ctx):
        image = str(c.get("image", ""))
        if image and not _parses(image):
            continue  # not a reference at all: image-reference-parses says why the kubelet refuses it
        if not is_pinned(image):
            yield container_hit(m, field, c, f"uses image {image!r}", ".image")


def _parses(image: str) -> bool:
    try:
        reference.parse(image)
    except ValueError:
        return False
    return True


@rule(
    "resources-every-container",
    scope="manifests",
    check_name=POLICY,
    reason="without requests the scheduler overcommits nodes; without a memory limit a pod can starve a node",
    remedy="set resources.requests (cpu, memory) and resources.limits.memory on every container",
)
def resources(ctx: ManifestsContext) -> Iterator[Hit]:
    for m, field, c in each_container(ctx):
        res = c.get("resources") or {}
        missing = [k for k in ("cpu", "memory") if k not in (res.get("requests") or {})]
        missing += ["limits.memory"] if "memory" not in (res.get("limits") or {}) else []
        if missing:
            yield container_hit(m, field, c, f"lacks {', '.join(missing)}", ".resources")


@rule(
    "policy-security-context",
    scope="manifests",
    check_name=POLICY,
    reason="containers without an explicit securityContext run with the runtime's permissive defaults",
    remedy="set securityContext.allowPrivilegeEscalation: false and capabilities.drop: [ALL] per container",
)
def security_context(ctx: ManifestsContext) -> Iterator[Hit]:
    for m, field, c in each_container(ctx):
        sc = c.get("securityContext")
        if not isinstance(sc, dict):
            yield container_hit(m, field, c, "has no securityContext")
        elif not sc.get("privileged") and sc.get("allowPrivilegeEscalation") is not False:
            yield container_hit(
                m, field, c, "does not set allowPrivilegeEscalation: false", ".securityContext"
            )


def _served(ctx: ManifestsContext, m: dict[str, Any]) -> bool:
    """Whether a Service of the render selects this workload's pods (so readiness gates traffic)."""
    labels = ((((m.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels")) or {}
    for svc in ctx.manifests:
        selector = (svc.get("spec") or {}).get("selector") if svc.get("kind") == "Service" else None
        if selector and all(labels.get(k) == v for k, v in selector.items()):
            return True
    return False


@rule(
    "policy-probes",
    scope="manifests",
    check_name=POLICY,
    reason="without probes a stuck engine or master keeps receiving traffic and is never restarted",
    remedy="give each long-running container that listens a livenessProbe, and a readinessProbe when a "
    "Service sends it traffic",
)
def probes(ctx: ManifestsContext) -> Iterator[Hit]:
    for m, _, spec in pod_templates(ctx.manifests):
        if m.get("kind") not in LONG_RUNNING:
            continue
        served = _served(ctx, m)
        for c in spec.get("containers") or []:
            if not c.get("ports"):
                continue  # a sidecar that listens nowhere (CSI registrar, provisioner) has nothing to probe
            missing = ["livenessProbe"] if not c.get("livenessProbe") else []
            missing += ["readinessProbe"] if served and not c.get("readinessProbe") else []
            if missing:
                yield Hit(
                    f"container {c.get('name')} lacks {' and '.join(missing)}",
                    subject=subject(m),
                    manifest_path=f"spec.containers[{c.get('name')}]",
                )


@rule(
    "policy-rbac-no-wildcards",
    scope="manifests",
    check_name=POLICY,
    reason="a wildcard grants every current and future verb or resource, far beyond what a component needs",
    remedy="list the exact apiGroups, resources and verbs (and resourceNames where the object is known)",
)
def rbac(ctx: ManifestsContext) -> Iterator[Hit]:
    for m in ctx.manifests:
        if m.get("kind") not in ("Role", "ClusterRole"):
            continue
        for i, r in enumerate(m.get("rules") or []):
            for key in ("apiGroups", "resources", "verbs", "nonResourceURLs"):
                if "*" in (r.get(key) or []):
                    yield Hit(
                        f"rule {i} has '*' in {key}", subject=subject(m), manifest_path=f"rules[{i}].{key}"
                    )


@rule(
    "policy-no-inline-secrets",
    scope="manifests",
    check_name=POLICY,
    reason="secret values in manifests end up in Helm's release history and in every rendered copy",
    remedy="reference an existing Secret (valueFrom.secretKeyRef / existing secret names) instead",
)
def no_inline_secrets(ctx: ManifestsContext) -> Iterator[Hit]:
    for m in ctx.manifests:
        if m.get("kind") == "Secret" and (m.get("data") or m.get("stringData")):
            yield Hit(
                "the chart renders a Secret with data (a secret value came from values)", subject=subject(m)
            )
    for m, field, c in each_container(ctx):
        for env in c.get("env") or []:
            # A $(NAME) reference is expanded by the kubelet from another variable: not a literal.
            if _SECRET_ENV.search(str(env.get("name", ""))) and is_literal(env.get("value")):
                name = env["name"]
                yield container_hit(m, field, c, f"env {name} has a literal value", f".env[{name}]")
