"""Cross-field rules on what each pod asks of its node: resources against limits and the instance type,
GPUs, ports inside one pod, shutdown timing, and a router in front of the engines.

Each rule catches, before the install, something the API server, the scheduler or the kubelet would refuse
or get wrong after it. Instance facts come from the planner's table (kvtier.plan.facts.INSTANCE_TYPES).
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import Any

from kvtier import facts as shipped
from kvtier import quantity
from kvtier.plan.facts import GIB
from kvtier.validate.findings import Severity
from kvtier.validate.inputs.loader import KeyPath
from kvtier.validate.rules import Hit, ManifestsContext, ValuesContext, rule
from kvtier.values import keyed, lookup, model_entries


def resource_blocks(tree: Any) -> Iterator[tuple[KeyPath, dict[str, Any]]]:
    """Every `resources: {requests, limits}` mapping in the values, the subcharts' included."""
    for path, value in keyed(tree, {"resources"}):
        if isinstance(value, dict) and ({"requests", "limits"} & value.keys()):
            yield path, value


@rule(
    "requests-within-limits",
    reason="the API server refuses a pod whose request of a resource is above its limit: the Deployment "
    "exists but no pod is ever created",
    remedy="lower the request or raise the limit so that requests <= limits for every resource",
)
def requests_within_limits(ctx: ValuesContext) -> Iterator[Hit]:
    for path, block in resource_blocks(ctx.values):
        requests, limits = block.get("requests"), block.get("limits")
        if not isinstance(requests, dict) or not isinstance(limits, dict):
            continue
        for name, asked in requests.items():
            if name not in limits:
                continue
            want, cap = quantity.try_parse(asked), quantity.try_parse(limits[name])
            if want is not None and cap is not None and want > cap:
                yield Hit(
                    f"requests.{name} {asked} is above limits.{name} {limits[name]}",
                    (*path, "requests", name),
                )


# Allocatable memory is the instance's less the kubelet's kube-reserved, system-reserved and eviction
# threshold, which depend on the node image (a few GiB on GPU instance types); the Curvine worker, CSI
# node plugin and GPU operator daemons ask for their share too. A request within this share of the
# instance is taken as schedulable, above it is a warning (the cluster's real allocatable: preflight).
ALLOCATABLE_SHARE = Fraction(95, 100)


def instance_facts(name: Any) -> tuple[str, int, float, float] | None:
    """(GPU, GPUs, GiB per GPU, host GiB) of an instance type, with or without HyperPod's `ml.` prefix."""
    found = shipped.instance_type(name)
    return (found.gpu, found.gpus, shipped.gpus()[found.gpu].memory_gib, found.host_gib) if found else None


def gpu_target(values: dict[str, Any]) -> bool:
    return values.get("target") == "hyperpod" or lookup(values, "engine", "accelerator") != "cpu"


@rule(
    "gpus-fit-instance",
    reason="a replica needs gpusPerReplica GPUs on one node: more than its instance type has never schedules",
    remedy="lower gpusPerReplica (and the tensor parallel size) or choose an instance type with enough GPUs",
)
def gpus_fit_instance(ctx: ValuesContext) -> Iterator[Hit]:
    if not gpu_target(ctx.values):
        return
    for i, model in model_entries(ctx.values):
        facts = instance_facts(model.get("instanceType"))
        gpus = model.get("gpusPerReplica", 1)
        if facts and isinstance(gpus, int) and gpus > facts[1]:
            yield Hit(
                f"models[{i}] asks for {gpus} GPUs per replica; {model.get('instanceType')} has {facts[1]} "
                f"({facts[0]})",
                ("models", i, "gpusPerReplica"),
                unconfirmed=shipped.unconfirmed_instance(model.get("instanceType"), ("gpus",)),
            )


@rule(
    "memory-fits-instance",
    reason="the scheduler places a pod only where its memory request fits the node's allocatable memory, "
    "which is below the instance's memory; a limit above it lets the node, not the pod, run out first",
    remedy="keep resources.requests.memory (and limits.memory) below the instance type's memory, leaving "
    "room for the kubelet's reservation, or choose a larger instance type",
)
def memory_fits_instance(ctx: ValuesContext) -> Iterator[Hit]:
    for i, model in model_entries(ctx.values):
        facts = instance_facts(model.get("instanceType"))
        if not facts:
            continue
        host = Fraction(facts[3]) * GIB
        checks: tuple[tuple[str, Severity], ...] = (("requests", "error"), ("limits", "warning"))
        for kind, severity in checks:
            text = lookup(model, "resources", kind, "memory")
            asked = quantity.try_parse(text)
            if asked is not None and asked > host:
                yield Hit(
                    f"models[{i}] resources.{kind}.memory {text} is above "
                    f"the {facts[3]:g} GiB of {model.get('instanceType')}",
                    ("models", i, "resources", kind, "memory"),
                    severity=severity,
                    unconfirmed=shipped.unconfirmed_instance(model.get("instanceType"), ("host_gib",)),
                )
            elif kind == "requests" and asked is not None and asked > host * ALLOCATABLE_SHARE:
                yield Hit(
                    f"models[{i}] resources.requests.memory {text} leaves under "
                    f"{float(1 - ALLOCATABLE_SHARE):.0%} of {model.get('instanceType')}'s {facts[3]:g} GiB "
                    "to the kubelet's reservation and the node's daemons: it may never schedule",
                    ("models", i, "resources", kind, "memory"),
                    severity="warning",
                )


Ports = list[tuple[KeyPath, Any]]


def _pod_ports(values: dict[str, Any]) -> Iterator[tuple[str, Ports]]:
    """(pod, [(values path, port)]) for each pod whose ports the values set; host-network pods share the
    node's ports, so the worker's are listed with the FUSE client's."""
    standalone = values.get("target", "standalone") == "standalone"
    if standalone:
        engine: Ports = [(("engine", "port"), lookup(values, "engine", "port"))]
        if lookup(values, "routing", "strategy") == "kvaware":
            engine.append((("engine", "kvEventsPort"), lookup(values, "engine", "kvEventsPort")))
        yield "engine", engine
        router: Ports = [(("router", k), lookup(values, "router", k)) for k in ("port", "metricsPort")]
        yield "router", router
    curvine = values.get("curvine") or {}
    if not isinstance(curvine, dict) or not curvine.get("enabled", True):
        return
    master = lookup(curvine, "master", "ports") or {}
    masters: Ports = [(("curvine", "master", "ports", k), v) for k, v in master.items()]
    yield "Curvine master", masters
    worker: Ports = [
        (("curvine", "worker", "ports", k), v) for k, v in (lookup(curvine, "worker", "ports") or {}).items()
    ]
    if lookup(curvine, "worker", "hostNetwork"):
        worker.append((("curvine", "config", "fuseWebPort"), lookup(curvine, "config", "fuseWebPort")))
        yield "Curvine worker and FUSE client (host network)", worker
    else:
        yield "Curvine worker", worker


@rule(
    "ports-distinct",
    reason="two listeners on one port in one pod (or one node, with host networking): the second process "
    "fails to bind and its container restarts for ever",
    remedy="give every port of a pod its own number",
)
def ports_distinct(ctx: ValuesContext) -> Iterator[Hit]:
    for pod, ports in _pod_ports(ctx.values):
        seen: dict[Any, KeyPath] = {}
        for path, port in ports:
            if port is None:
                continue
            if port in seen:
                first = ".".join(str(p) for p in seen[port])
                yield Hit(f"{pod}: port {port} is also {first}", path)
            else:
                seen[port] = path


@rule(
    "grace-covers-prestop",
    reason="the kubelet sends SIGTERM only after the preStop sleep, inside the termination grace period: "
    "a sleep as long as the period leaves vLLM no time to finish requests (longer, and the API server "
    "refuses the pod)",
    remedy="make engine.terminationGracePeriodSeconds longer than engine.preStopSleepSeconds plus the time "
    "vLLM needs to drain (the defaults: 120 and 10)",
)
def grace_covers_prestop(ctx: ValuesContext) -> Iterator[Hit]:
    sleep = lookup(ctx.values, "engine", "preStopSleepSeconds")
    grace = lookup(ctx.values, "engine", "terminationGracePeriodSeconds")
    if isinstance(sleep, int) and isinstance(grace, int) and sleep and sleep >= grace:
        yield Hit(
            f"engine.preStopSleepSeconds {sleep} leaves nothing of terminationGracePeriodSeconds {grace}",
            ("engine", "preStopSleepSeconds"),
        )


@rule(
    "router-serves-engines",
    reason="clients reach the engines through the router Service: with no router pod, every request fails "
    "while the engines are healthy",
    remedy="set router.replicas to at least 1 (2 for availability), or router.hpa.minReplicas <= maxReplicas",
)
def router_serves_engines(ctx: ValuesContext) -> Iterator[Hit]:
    if ctx.values.get("target", "standalone") != "standalone" or not list(model_entries(ctx.values)):
        return
    hpa = lookup(ctx.values, "router", "hpa") or {}
    if hpa.get("enabled"):
        low, high = hpa.get("minReplicas"), hpa.get("maxReplicas")
        if isinstance(low, int) and isinstance(high, int) and low > high:
            yield Hit(
                f"router.hpa.minReplicas {low} is above maxReplicas {high}", ("router", "hpa", "minReplicas")
            )
    elif lookup(ctx.values, "router", "replicas") == 0:
        yield Hit("router.replicas is 0 while models are served", ("router", "replicas"))


def _identity(doc: dict[str, Any], namespace: str) -> tuple[str, str, str, str]:
    meta = doc.get("metadata") or {}
    group = str(doc.get("apiVersion", "")).rpartition("/")[0]
    return group, str(doc.get("kind")), str(meta.get("namespace") or namespace), str(meta.get("name"))


@rule(
    "objects-unique",
    scope="manifests",
    reason="two rendered objects with one kind and name are one object in the cluster: the second "
    "overwrites the first (model names that share their first characters, or the same name twice)",
    remedy="give every model a distinct, shorter name (object names are <release>-<chart>, cut so that "
    "-<model name>[-suffix] fits the kind's limit, then -<model name>[-suffix])",
)
def objects_unique(ctx: ManifestsContext) -> Iterator[Hit]:
    seen: set[tuple[str, str, str, str]] = set()
    for doc in ctx.manifests:
        if not isinstance(doc, dict) or not doc.get("kind"):
            continue
        key = _identity(doc, ctx.namespace)
        if key in seen:
            yield Hit(f"{key[1]} {key[3]!r} is rendered more than once", subject=f"{key[1]}/{key[3]}")
        seen.add(key)
