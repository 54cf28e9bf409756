"""A rendered Ingress as the exposure rules read it: which of its hosts its TLS covers, read as the Ingress
API defines it (networking.k8s.io/v1), and whether the pods behind it ask for the API key.

Sources:
- IngressRule.host (API reference): a rule without a host takes requests for any host; a host may start
  with one wildcard label, `*.example.com`.
- IngressTLS.hosts (API reference): the hosts the certificate is for; left out, the controller's own
  wildcard (default) certificate applies.
- Ingress concepts, "Hostname wildcards" (kubernetes.io/docs/concepts/services-networking/ingress/): the
  wildcard stands for exactly one DNS label (`*.foo.com` takes bar.foo.com, not baz.bar.foo.com nor
  foo.com); "TLS": a certificate cannot serve the rule without a host, so tls hosts must name rule hosts.
- Annotations by which a controller terminates TLS with a certificate the render does not show:
  AWS Load Balancer Controller, Ingress annotations (docs/guide/ingress/annotations.md):
  `alb.ingress.kubernetes.io/certificate-arn`; with it `listen-ports` defaults to HTTPS 443, and
  `ssl-redirect` turns the HTTP listeners into redirects. GKE (cloud.google.com/kubernetes-engine/docs:
  "Using multiple SSL certificates in HTTPS load balancing with Ingress", "Using Google-managed SSL
  certificates", "Ingress for external Application Load Balancers" / Disabling HTTP):
  `ingress.gcp.kubernetes.io/pre-shared-cert`, `networking.gke.io/managed-certificates`, and
  `kubernetes.io/ingress.allow-http: "false"` to close port 80.

Forgiving like kvtier.manifests: a field of the wrong type reads as absent (the schemas report it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvtier.manifests import at, containers, pod_templates

ANY_HOST = ""  # a rule without `host`, and spec.defaultBackend
# Annotation -> how to confirm the TLS it asks for (the render shows neither the certificate nor the
# listeners).
AWS_CONFIRM = (
    "confirm the ALB's listeners (aws elbv2 describe-listeners): HTTPS with that certificate, and port 80 "
    "absent or redirecting (alb.ingress.kubernetes.io/listen-ports, alb.ingress.kubernetes.io/ssl-redirect)"
)
GKE_CONFIRM = (
    "confirm the load balancer serves a certificate for the host (kubectl describe managedcertificate: "
    "Active; gcloud compute ssl-certificates describe for a pre-shared one) and that "
    'kubernetes.io/ingress.allow-http: "false" closes port 80'
)
TLS_ANNOTATIONS = {
    "alb.ingress.kubernetes.io/certificate-arn": AWS_CONFIRM,
    "ingress.gcp.kubernetes.io/pre-shared-cert": GKE_CONFIRM,
    "networking.gke.io/managed-certificates": GKE_CONFIRM,
}


@dataclass(frozen=True)
class Rule:
    """One host an Ingress routes, with where the render says so."""

    host: str  # ANY_HOST for a rule without a host
    path: str  # rendered field path, e.g. spec.rules[0]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def rule_hosts(ingress: dict[str, Any]) -> list[Rule]:
    """Every host the Ingress routes: each rule's host, and any host for a rule without one or a
    defaultBackend."""
    spec = _dict(ingress.get("spec"))
    found = [
        Rule(str(_dict(r).get("host") or ANY_HOST).lower(), f"spec.rules[{i}]")
        for i, r in enumerate(_list(spec.get("rules")))
    ]
    if spec.get("defaultBackend"):
        found.append(Rule(ANY_HOST, "spec.defaultBackend"))
    return found


def tls_hosts(ingress: dict[str, Any]) -> list[list[str]]:
    """The hosts of each spec.tls entry, lower-cased; [] for an entry without hosts."""
    entries = _list(_dict(ingress.get("spec")).get("tls"))
    return [[str(h).lower() for h in _list(_dict(e).get("hosts")) if h] for e in entries]


def names(tls_host: str, host: str) -> bool:
    """Whether a certificate host names a rule host: the same name, or a wildcard one label above it."""
    if tls_host == host:
        return True
    label, dot, parent = host.partition(".")
    return tls_host.startswith("*.") and bool(label and dot) and tls_host[2:] == parent


def covered(host: str, entries: list[list[str]]) -> bool:
    """Whether a spec.tls entry covers `host`: an entry without hosts (the controller's default
    certificate) covers every host, the rule for any host included; an entry with hosts covers the hosts
    it names."""
    if any(not hosts for hosts in entries):
        return True
    return host != ANY_HOST and any(names(t, host) for hosts in entries for t in hosts)


def uncovered(ingress: dict[str, Any]) -> list[Rule]:
    """The rules whose host no spec.tls entry covers: requests to them travel as plain HTTP."""
    entries = tls_hosts(ingress)
    return [r for r in rule_hosts(ingress) if not covered(r.host, entries)]


def annotation_tls(ingress: dict[str, Any]) -> dict[str, str]:
    """The TLS annotations set on the Ingress, each with how to confirm what it asks for."""
    annotations = _dict(_dict(ingress.get("metadata")).get("annotations"))
    return {key: how for key, how in TLS_ANNOTATIONS.items() if str(annotations.get(key) or "").strip()}


def backend_services(ingress: dict[str, Any]) -> set[str]:
    """The Service names the Ingress sends requests to (rules' paths and the defaultBackend)."""
    spec = _dict(ingress.get("spec"))
    backends = [_dict(spec.get("defaultBackend"))]
    for r in _list(spec.get("rules")):
        backends += [_dict(_dict(p).get("backend")) for p in _list(_dict(_dict(r).get("http")).get("paths"))]
    return {str(_dict(b.get("service")).get("name")) for b in backends if _dict(b.get("service")).get("name")}


# How a rendered pod asks for the API key (templates/_names.tpl apiKeyEnv, templates/_router.tpl): the
# VLLM_API_KEY env var from auth.apiKeySecret, and vllm-router's --api-key.
KEY_ENV = "VLLM_API_KEY"


def _pod_labels(m: dict[str, Any], where: str) -> dict[str, Any]:
    """The labels of the pod template whose spec is at `where` (spec.template.spec -> its metadata)."""
    base = where.removesuffix("spec").rstrip(".")
    labels = at(m, f"{base}.metadata.labels" if base else "metadata.labels")
    return labels if isinstance(labels, dict) else {}


def _asks_for_key(container: dict[str, Any]) -> bool:
    env = _list(container.get("env"))
    if any(_dict(e).get("name") == KEY_ENV and _dict(e).get("valueFrom") for e in env):
        return True
    argv = [*_list(container.get("command")), *_list(container.get("args"))]
    return "--api-key" in [str(a) for a in argv]


def keyed(manifests: list[dict[str, Any]], ingress: dict[str, Any]) -> bool:
    """Whether the pods behind the Ingress ask for the API key: its backend Services' selectors matched
    against the rendered pod templates' labels."""
    services = backend_services(ingress)
    selectors = [
        at(m, "spec.selector")
        for m in manifests
        if m.get("kind") == "Service" and (m.get("metadata") or {}).get("name") in services
    ]
    selectors = [s for s in selectors if isinstance(s, dict) and s]
    return any(
        any(s.items() <= _pod_labels(m, where).items() for s in selectors)
        and any(_asks_for_key(c) for _, _, c in containers(spec))
        for m, where, spec in pod_templates(manifests)
    )
