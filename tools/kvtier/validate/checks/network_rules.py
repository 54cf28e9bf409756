"""NetworkPolicies against what else the values turn on (docs/security.md).

The charts render a NetworkPolicy for every pod, on by default, that admits metrics scrapers only from
`networkPolicy.metricsFrom` (and Curvine's `curvine.networkPolicy.metricsFrom`). A monitor turned on with
that list empty renders fine and the API server admits it, but where the cluster enforces the policies
Prometheus never reaches the pods: the dashboards and alerts go quiet without an error anywhere.

The router exposure rules judge a way in from outside the namespace by its harm: a NodePort or LoadBalancer
router Service, an Ingress or an HTTPRoute (router.service, router.ingress, router.httpRoute) hands the
OpenAI API, and the GPUs behind it, to whoever reaches that path; only auth.apiKeySecret stands in the way.
An Ingress's TLS is judged on the rendered Ingress (router-ingress-tls, kvtier.validate.checks.ingress_tls),
not on router.ingress.tls: the template keeps only the entries that cover the model's hosts, so the values'
shape does not show which hosts end up with TLS.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kvtier.manifests import subject
from kvtier.validate.checks import ingress_tls
from kvtier.validate.inputs.loader import KeyPath
from kvtier.validate.rules import Hit, ManifestsContext, ValuesContext, rule
from kvtier.values import lookup, model_entries

SCRAPER_EXAMPLE = "[{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]"


@rule(
    "networkpolicy-metrics-scraper",
    reason="a ServiceMonitor or PodMonitor is rendered while the NetworkPolicies admit no scraper "
    "(metricsFrom empty): where policies are enforced Prometheus never reaches the metrics ports, and the "
    "dashboards and alerts go quiet",
    remedy="set networkPolicy.metricsFrom (curvine.networkPolicy.metricsFrom for Curvine's monitor) to the "
    f"Prometheus pods' peers, e.g. {SCRAPER_EXAMPLE}",
)
def metrics_scraper_admitted(ctx: ValuesContext) -> Iterator[Hit]:
    values = ctx.values
    monitors = [
        key
        for key in ("podMonitor", "serviceMonitor")
        if lookup(values, "metrics", key, "enabled", default=False) is True
    ]
    policies = lookup(values, "networkPolicy", "enabled", default=True) is True
    if monitors and policies and not lookup(values, "networkPolicy", "metricsFrom", default=[]):
        yield Hit(
            f"metrics.{' and metrics.'.join(monitors)} on, but networkPolicy.metricsFrom is empty: the "
            "engines' and routers' NetworkPolicies admit no scraper",
            ("networkPolicy",),
            severity="warning",
        )
    curvine_on = lookup(values, "curvine", "enabled", default=True) is True
    curvine_monitor = lookup(values, "curvine", "serviceMonitor", "enabled", default=False) is True
    curvine_policies = lookup(values, "curvine", "networkPolicy", "enabled", default=True) is True
    curvine_scraper = lookup(values, "curvine", "networkPolicy", "metricsFrom", default=[])
    if curvine_on and curvine_monitor and curvine_policies and not curvine_scraper:
        yield Hit(
            "curvine.serviceMonitor on, but curvine.networkPolicy.metricsFrom is empty: Curvine's "
            "NetworkPolicies admit no scraper",
            ("curvine", "networkPolicy"),
            severity="warning",
        )


@rule(
    "networkpolicy-node-cidrs",
    reason="host-network Curvine workers reach the masters from their node's address, which no pod "
    "selector matches: without the nodes' ranges the masters' NetworkPolicy shuts them out, so the chart "
    "refuses to render it",
    remedy="set curvine.networkPolicy.nodeCIDRs to the nodes' address ranges (e.g. the VPC subnets), or "
    "curvine.networkPolicy.enabled: false",
)
def node_cidrs_for_host_network(ctx: ValuesContext) -> Iterator[Hit]:
    values = ctx.values
    if lookup(values, "curvine", "enabled", default=True) is not True:
        return
    host_network = lookup(values, "curvine", "worker", "hostNetwork") is True
    policies = lookup(values, "curvine", "networkPolicy", "enabled", default=True) is True
    if host_network and policies and not lookup(values, "curvine", "networkPolicy", "nodeCIDRs", default=[]):
        yield Hit(
            "curvine.worker.hostNetwork is true, but curvine.networkPolicy.nodeCIDRs is empty",
            ("curvine", "worker", "hostNetwork"),
        )


# Service annotations that keep a load balancer inside the private network, with the value that does it.
# AWS Load Balancer Controller (docs guide/service/annotations): aws-load-balancer-scheme `internal` or
# `internet-facing` (its default is internal, the in-tree cloud provider's internet-facing: only an explicit
# annotation counts here), and the deprecated aws-load-balancer-internal "true". GKE's and AKS's own keys too.
AWS_SCHEME = "service.beta.kubernetes.io/aws-load-balancer-scheme"
INTERNAL_ANNOTATIONS = {
    AWS_SCHEME: "internal",
    "service.beta.kubernetes.io/aws-load-balancer-internal": "true",
    "networking.gke.io/load-balancer-type": "internal",
    "service.beta.kubernetes.io/azure-load-balancer-internal": "true",
}
# A TLS listener on an AWS load balancer (the certificate's ARN): without one it forwards plain HTTP.
AWS_TLS_CERT = "service.beta.kubernetes.io/aws-load-balancer-ssl-cert"
API_KEY_FIX = (
    "put a key in a Secret in the release namespace (kubectl create secret generic <name> "
    "--from-literal=api-key=<key>) and set auth.apiKeySecret.name to it"
)


@dataclass(frozen=True)
class Entrance:
    """One way into the routers from outside their namespace."""

    path: KeyPath  # the value that opens it
    what: str  # the way in, as the user set it
    internal: bool  # reachable only from the private network
    unchecked: tuple[str, ...]  # what the values cannot show to be closed, for a keyed exposed entrance


def internal_load_balancer(annotations: Any) -> bool:
    """Whether the Service's annotations ask for an internal load balancer and none for an internet-facing
    one (conflicting annotations count as internet-facing: the harm decides)."""
    if not isinstance(annotations, dict):
        return False
    if str(annotations.get(AWS_SCHEME, "")).strip().lower() == "internet-facing":
        return False
    return any(
        str(annotations.get(key, "")).strip().lower() == want for key, want in INTERNAL_ANNOTATIONS.items()
    )


def router_entrances(values: dict[str, Any]) -> list[Entrance]:
    """The ways into the routers the values open (standalone target: the only one with routers)."""
    if lookup(values, "target", default="standalone") != "standalone":
        return []
    found = []
    service_type = lookup(values, "router", "service", "type", default="ClusterIP")
    if service_type == "NodePort":
        found.append(
            Entrance(
                ("router", "service", "type"),
                "router.service.type NodePort (the port opens on every node)",
                False,
                ("that the nodes' security groups or firewall admit only your clients",
                 "TLS in front: the node port carries plain HTTP"),
            )
        )  # fmt: skip
    elif service_type == "LoadBalancer":
        annotations = lookup(values, "router", "service", "annotations", default={}) or {}
        internal = internal_load_balancer(annotations)
        scheme = "internal" if internal else "no internal-scheme annotation"
        unchecked = []
        if not lookup(values, "router", "service", "loadBalancerSourceRanges", default=[]):
            unchecked.append("router.service.loadBalancerSourceRanges (empty: any address)")
        if not (isinstance(annotations, dict) and annotations.get(AWS_TLS_CERT)):
            unchecked.append(f"TLS at the load balancer ({AWS_TLS_CERT} or your provider's equivalent)")
        found.append(
            Entrance(
                ("router", "service", "type"),
                f"router.service.type LoadBalancer ({scheme})",
                internal,
                tuple(unchecked),
            )
        )
    if lookup(values, "router", "ingress", "enabled", default=False) is True:
        # Its TLS is judged on the rendered Ingresses (router-ingress-tls), host by host.
        found.append(Entrance(("router", "ingress", "enabled"), "router.ingress", False, ()))
    if lookup(values, "router", "httpRoute", "enabled", default=False) is True:
        found.append(
            Entrance(
                ("router", "httpRoute", "enabled"),
                "router.httpRoute",
                False,
                ("TLS on the listeners of the router.httpRoute.parentRefs Gateways (routes cannot show it)",),
            )
        )
    return found


def _has_api_key(values: dict[str, Any]) -> bool:
    return bool(lookup(values, "auth", "apiKeySecret", "name", default=""))


@rule(
    "router-exposed-api-key",
    reason="a NodePort or LoadBalancer router Service, an Ingress or an HTTPRoute lets anyone who reaches it "
    "send requests to the engines, and without auth.apiKeySecret nothing asks them for a key: the GPUs "
    "serve strangers and the prompts cache in L1/L2 (an internal load balancer narrows that to the network)",
    remedy="set auth.apiKeySecret.name to a Secret holding the key (the engines require it, clients send "
    "it), or keep the router ClusterIP behind your own authenticating gateway",
)
def router_exposed_api_key(ctx: ValuesContext) -> Iterator[Hit]:
    if _has_api_key(ctx.values):
        return
    for way in router_entrances(ctx.values):
        if way.internal:
            yield Hit(
                f"{way.what} without an API key: any workload in the private network may use the "
                f"engines; {API_KEY_FIX}",
                way.path,
                severity="warning",
            )
        else:
            yield Hit(
                f"{way.what} exposes the router without an API key (auth.apiKeySecret.name is empty): "
                f"anyone who reaches it may use the engines; {API_KEY_FIX}",
                way.path,
            )


@rule(
    "router-exposed-checks",
    reason="an API key guards an exposed router only as far as its path: a load balancer open to any address "
    "takes guesses from the whole internet, and without TLS the key and the prompts cross the network in "
    "clear text (an Ingress's TLS is judged on the render: router-ingress-tls)",
    remedy="limit the clients (router.service.loadBalancerSourceRanges, security groups) and terminate TLS "
    "in front of the router (the Gateway's listeners, the load balancer's certificate)",
)
def router_exposed_checks(ctx: ValuesContext) -> Iterator[Hit]:
    if not _has_api_key(ctx.values):
        return  # router-exposed-api-key speaks first
    for way in router_entrances(ctx.values):
        if not way.internal and way.unchecked:
            yield Hit(
                f"{way.what} exposes the router (with an API key); check {'; '.join(way.unchecked)}",
                way.path,
                severity="warning",
            )


MODEL_LABEL = "kv-tiered-inference/model"


def _tls_fix(host: str, model: str) -> str:
    if host == ingress_tls.ANY_HOST:
        return (
            f"name the model's hosts in router.ingress.hosts.{model} with a certificate for them in "
            "router.ingress.tls, or add an entry without hosts ({secretName: <tls secret>}) for the "
            "controller's default certificate"
        )
    label, _, parent = host.partition(".")
    wildcard = f" (or *.{parent}, which covers one label)" if "." in parent and label != "*" else ""
    return (
        f"add to router.ingress.tls an entry naming it, e.g. {{secretName: <tls secret>, hosts: [{host}]}}"
        f"{wildcard}, or one without hosts for the controller's default certificate"
    )


@rule(
    "router-ingress-tls",
    scope="manifests",
    reason="an Ingress terminates TLS only for the rule hosts a spec.tls entry covers (IngressTLS.hosts: the "
    "same name, a wildcard one label above it, or an entry without hosts for the controller's default "
    "certificate, the only cover of a rule for any host): on any other host clients send the API key and "
    "the prompts in clear text",
    remedy="add to router.ingress.tls an entry whose hosts name the host (or *.<parent> for one label "
    "under it), or one without hosts for the controller's default certificate; where a controller "
    "annotation supplies the certificate, confirm its HTTPS listener",
)
def router_ingress_tls(ctx: ManifestsContext) -> Iterator[Hit]:
    for m in ctx.manifests:
        if m.get("kind") != "Ingress" or not ingress_tls.keyed(ctx.manifests, m):
            continue  # without a key, router-exposed-api-key refuses the way in already
        who = subject(m)
        model = str(((m.get("metadata") or {}).get("labels") or {}).get(MODEL_LABEL) or "<model>")
        named = sorted({h for hosts in ingress_tls.tls_hosts(m) for h in hosts})
        has = f"spec.tls names {', '.join(named)}" if named else "no spec.tls entry is rendered"
        annotated = ingress_tls.annotation_tls(m)
        for r in ingress_tls.uncovered(m):
            what = f"host {r.host}" if r.host else "the rule for any host"
            if annotated:
                key, how = next(iter(annotated.items()))
                yield Hit(
                    f"{who} {what}: no spec.tls entry covers it ({has}), but {key} asks the controller for "
                    f"TLS, which the render cannot prove; {how}",
                    subject=who,
                    manifest_path=r.path,
                    severity="warning",
                )
                continue
            yield Hit(
                f"{who} {what}: no spec.tls entry covers it ({has}), so clients send the API key "
                f"(auth.apiKeySecret) and the prompts to it as plain HTTP; {_tls_fix(r.host, model)}",
                subject=who,
                manifest_path=r.path,
            )


@rule(
    "router-exposure-networkpolicy",
    reason="with networkPolicy.clientsFrom set, the routers' NetworkPolicy admits only those peers: the "
    "ingress controller, the Gateway or the load balancer in front of an exposed router is shut out unless "
    "it is named, and every request through it times out",
    remedy="set networkPolicy.exposedFrom to the peers on the way in (the ingress controller's or Gateway's "
    "namespace, the load balancer's or the nodes' address ranges), or add them to networkPolicy.clientsFrom",
)
def router_exposure_networkpolicy(ctx: ValuesContext) -> Iterator[Hit]:
    values = ctx.values
    ways = router_entrances(values)
    policies = lookup(values, "networkPolicy", "enabled", default=True) is True
    clients = lookup(values, "networkPolicy", "clientsFrom", default=[])
    if ways and policies and clients and not lookup(values, "networkPolicy", "exposedFrom", default=[]):
        yield Hit(
            f"{', '.join(w.what for w in ways)} on while networkPolicy.clientsFrom admits only its peers and "
            "networkPolicy.exposedFrom is empty: unless clientsFrom names them, the routers' NetworkPolicy "
            "shuts out the way in",
            ("networkPolicy", "clientsFrom"),
            severity="warning",
        )


@rule(
    "router-route-models",
    reason="router.ingress.hosts and router.httpRoute.hostnames are keyed by model name, and the chart "
    "renders an Ingress or HTTPRoute only for a model they name: a key no model has renders nothing, so "
    "the way in the values describe never exists",
    remedy="key the hosts by a name in models[] (e.g. {<model name>: [llm.example.com]}); an empty list "
    "routes any host to that model",
)
def router_route_models(ctx: ValuesContext) -> Iterator[Hit]:
    values = ctx.values
    if lookup(values, "target", default="standalone") != "standalone":
        return
    names = {str(m.get("name")) for _, m in model_entries(values)}
    for route, key in (("ingress", "hosts"), ("httpRoute", "hostnames")):
        if lookup(values, "router", route, "enabled", default=False) is not True:
            continue
        routed = lookup(values, "router", route, key, default={}) or {}
        for name in (n for n in routed if n not in names):
            yield Hit(
                f"router.{route}.{key} names model {name!r}, which models[] lacks "
                f"(models: {', '.join(sorted(names)) or 'none'}): no {route} is rendered for it",
                ("router", route, key, name),
                severity="warning",
            )
        if not routed:
            yield Hit(
                f"router.{route}.enabled is true but router.{route}.{key} names no model: nothing renders",
                ("router", route, "enabled"),
                severity="warning",
            )
