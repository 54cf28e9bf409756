"""NetworkPolicies against what else the values turn on (docs/security.md).

The charts render a NetworkPolicy for every pod, on by default, that admits metrics scrapers only from
`networkPolicy.metricsFrom` (and Curvine's `curvine.networkPolicy.metricsFrom`). A monitor turned on with
that list empty renders fine and the API server admits it, but where the cluster enforces the policies
Prometheus never reaches the pods: the dashboards and alerts go quiet without an error anywhere.
"""

from __future__ import annotations

from collections.abc import Iterator

from kvtier.validate.rules import Hit, ValuesContext, rule
from kvtier.values import lookup

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
