"""The router flags the umbrella chart renders for a routing strategy, so the rig runs the same router.

`helm template` the chart (pinned Helm 3) with `routing.strategy`, find the router Deployment and take
its container's flags. The rig then swaps only what is about where things are (listen address, the
worker list instead of Kubernetes discovery, metrics port, ZMQ event endpoints): DISCOVERY_FLAGS.
"""

from __future__ import annotations

from typing import Any

from kvtier import helm, paths
from kvtier.engine_rig.errors import RigError
from kvtier.errors import UserError

CHART = paths.CHARTS / "kv-tiered-inference"
STRATEGY_POLICY = {
    "prefixaware": "cache_aware",
    "kvaware": "kv_aware",
    "session": "consistent_hash",
    "roundrobin": "round_robin",
}
# flag -> how many values follow it ("*": every value up to the next flag).
DISCOVERY_FLAGS: dict[str, int | str] = {
    "--host": 1,
    "--port": 1,
    "--worker-urls": "*",
    "--service-discovery": 0,
    "--selector": "*",
    "--service-discovery-namespace": 1,
    "--service-discovery-port": 1,
    "--prometheus-host": 1,
    "--prometheus-port": 1,
    "--kv-event-source": 1,
    "--kv-event-block-size": 1,
    "--kv-event-model": 1,
}


def _is_router(doc: dict[str, Any]) -> bool:
    meta = doc.get("metadata") or {}
    labels = meta.get("labels") or {}
    return doc.get("kind") == "Deployment" and (
        labels.get("app.kubernetes.io/component") == "router" or str(meta.get("name", "")).endswith("-router")
    )


def flags_from_manifests(manifests: list[dict[str, Any]]) -> list[str]:
    """The router container's flags (command + args from the first `--` on) in rendered manifests."""
    routers = [d for d in manifests if _is_router(d)]
    if len(routers) != 1:
        raise RigError(f"expected one router Deployment in the rendered chart, found {len(routers)}")
    containers = routers[0]["spec"]["template"]["spec"]["containers"]
    for container in containers:
        argv = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
        if any(a.startswith("--policy") for a in argv):
            first = next(i for i, a in enumerate(argv) if a.startswith("--"))
            return argv[first:]
    raise RigError("the router Deployment has no container with a --policy flag")


def strip_discovery(flags: list[str]) -> list[str]:
    """Drop DISCOVERY_FLAGS (and their values) from a flag list; `--flag=value` forms too."""
    kept: list[str] = []
    skip: int | str = 0
    for arg in flags:
        if skip == "*" and not arg.startswith("--"):
            continue
        if isinstance(skip, int) and skip > 0:
            skip -= 1
            continue
        skip = 0
        name = arg.split("=", 1)[0]
        if name in DISCOVERY_FLAGS:
            skip = 0 if "=" in arg else DISCOVERY_FLAGS[name]
            continue
        kept.append(arg)
    return kept


def chart_flags(strategy: str) -> list[str]:
    """Render the chart for `strategy` and return its router flags, less DISCOVERY_FLAGS."""
    if strategy not in STRATEGY_POLICY:
        raise RigError(f"unknown routing strategy {strategy!r}; expected one of {', '.join(STRATEGY_POLICY)}")
    if not (CHART / "Chart.yaml").exists():
        raise RigError(f"{CHART} has no Chart.yaml yet, so the router flags cannot be rendered")
    sets = ["--set", f"routing.strategy={strategy}", "--set", "target=standalone"]
    try:
        rendered = helm.Template(CHART, "rig", overlay=sets).render()
    except helm.TemplateError as error:
        raise RigError(f"helm template {CHART.name} failed: {error}") from None
    return strip_discovery(flags_from_manifests(rendered.manifests))


def router_flags(strategy: str) -> tuple[list[str], str]:
    """(flags, where they came from). The chart's when it renders; otherwise only the policy.

    TODO(chart): the fallback exists only while charts/kv-tiered-inference has no router template;
    the engine tests require source == "chart" under CI, so the fallback can never pass there.
    """
    try:
        return chart_flags(strategy), "chart"
    except UserError as error:  # no chart, no pinned Helm, or a failed render
        if strategy not in STRATEGY_POLICY:
            raise
        return ["--policy", STRATEGY_POLICY[strategy]], f"policy only (TODO: {error})"
