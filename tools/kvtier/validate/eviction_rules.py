"""Cross-field rules on the L2's size: the eviction job's watermarks and schedule, and the claim against
the Curvine pool that backs it.

Watermarks are read with the eviction script's own parser (kvtier.podscripts.l2_evict, the file the
CronJob runs), so what this rule accepts the job accepts; schedules with the API server's grammar
(kvtier.validate.cron).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from kvtier import quantity
from kvtier.podscripts import l2_evict
from kvtier.upstream import curvine_config
from kvtier.validate import cron
from kvtier.validate.rules import Hit, ValuesContext, rule
from kvtier.validate.values_rules import lookup, model_entries
from kvtier.validate.workload_rules import instance_facts

EVICTION = ("cache", "l2", "eviction")


def _eviction(values: dict[str, Any]) -> dict[str, Any] | None:
    """The eviction settings when the chart renders the eviction CronJob."""
    l2 = lookup(values, "cache", "l2") or {}
    eviction = l2.get("eviction") if isinstance(l2, dict) else None
    if not l2.get("enabled", True) or not isinstance(eviction, dict) or not eviction.get("enabled", True):
        return None
    return eviction


@rule(
    "eviction-watermarks",
    reason="the eviction job refuses a low watermark above the high one, or a size it cannot read, and "
    "then fails every run while the L2 volume fills up",
    remedy="set cache.l2.eviction.lowWatermark <= highWatermark (e.g. 70% and 85%), both as percentages "
    "or sizes such as 400Gi, and a capacity (or claim.size) written as a size",
)
def watermarks(ctx: ValuesContext) -> Iterator[Hit]:
    eviction = _eviction(ctx.values)
    if eviction is None:
        return
    capacity_text = eviction.get("capacity") or lookup(ctx.values, "cache", "l2", "claim", "size")
    capacity_key = (*EVICTION, "capacity") if eviction.get("capacity") else ("cache", "l2", "claim", "size")
    try:
        capacity = l2_evict.parse_size(str(capacity_text))
    except l2_evict.UsageError as error:
        yield Hit(f"the eviction job cannot read its capacity: {error}", capacity_key)
        return
    levels = {}
    for name in ("highWatermark", "lowWatermark"):
        if eviction.get(name) is None:
            continue  # unset: the chart's default applies (the effective values always hold one)
        try:
            levels[name] = l2_evict.parse_watermark(str(eviction.get(name)), capacity)
        except l2_evict.UsageError as error:
            yield Hit(f"the eviction job cannot read {name}: {error}", (*EVICTION, name))
    if len(levels) < 2:
        return
    high, low = levels["highWatermark"], levels["lowWatermark"]
    if low > high:
        yield Hit(
            f"lowWatermark {eviction['lowWatermark']} ({low / 2**30:.1f} GiB) is above highWatermark "
            f"{eviction['highWatermark']} ({high / 2**30:.1f} GiB)",
            (*EVICTION, "lowWatermark"),
        )
    if high > capacity:
        yield Hit(
            f"highWatermark {eviction['highWatermark']} is above the capacity {capacity_text}: eviction "
            "starts only after the volume is full",
            (*EVICTION, "highWatermark"),
            severity="warning",
        )


@rule(
    "eviction-schedule-cron",
    reason="the API server refuses a CronJob whose schedule its cron parser cannot read: the install fails "
    "(or, with --server absent, an upgrade is half applied)",
    remedy='write cache.l2.eviction.schedule as five fields ("*/5 * * * *"; day of week 0-6) or a '
    "descriptor (@hourly, @every 10m)",
)
def schedule_cron(ctx: ValuesContext) -> Iterator[Hit]:
    eviction = _eviction(ctx.values)
    if eviction is None or not isinstance(eviction.get("schedule"), str):
        return
    error = cron.schedule_error(eviction["schedule"])
    if error:
        yield Hit(f"schedule {eviction['schedule']!r}: {error}", (*EVICTION, "schedule"))


def engine_nodes(values: dict[str, Any]) -> int | None:
    """The fewest GPU nodes the models' replicas fill, when every instance type is known."""
    gpus_by_type: dict[int, int] = defaultdict(int)
    for _, model in model_entries(values):
        facts = instance_facts(model.get("instanceType"))
        if not facts:
            return None
        gpus_by_type[facts[1]] += int(model.get("replicas") or 0) * int(model.get("gpusPerReplica") or 1)
    return sum(math.ceil(gpus / per_node) for per_node, gpus in gpus_by_type.items()) or None


@rule(
    "l2-claim-within-pool",
    reason="Curvine does not enforce a claim's size: a claim larger than the workers' data dirs lets LMCache "
    "write until the pool is full, and every L2 write fails after that",
    remedy="give curvine.worker.dataDirs capacities that add up (times the nodes with workers) to more "
    "than cache.l2.claim.size, or lower the claim",
)
def claim_within_pool(ctx: ValuesContext) -> Iterator[Hit]:
    curvine = ctx.values.get("curvine") or {}
    claim = lookup(ctx.values, "cache", "l2", "claim", "size")
    size = quantity.try_parse(claim)
    if not isinstance(curvine, dict) or not curvine.get("enabled", True) or size is None:
        return
    if not lookup(ctx.values, "cache", "l2", "enabled", default=True):
        return
    dirs = lookup(curvine, "worker", "dataDirs") or []
    capacities = [
        curvine_config.size_bytes(d.get("capacity")) if isinstance(d, dict) and d.get("capacity") else None
        for d in dirs
    ]
    reserved = curvine_config.size_bytes(lookup(curvine, "worker", "dirReserved", default="0")) or 0
    nodes = engine_nodes(ctx.values)
    if not dirs or None in capacities or nodes is None:
        return  # a data dir of unknown size (the whole filesystem) or nodes of unknown type: no estimate
    per_node = sum(max(c - reserved, 0) for c in capacities if c is not None)
    if size > per_node * nodes:
        yield Hit(
            f"cache.l2.claim.size {claim} is more than the pool of "
            f"the {nodes} GPU node(s) the models fill ({per_node / 2**30:.0f} GiB each after dirReserved)",
            ("cache", "l2", "claim", "size"),
            severity="warning",
        )
