"""Cross-field rules on the L2's size: the eviction job's watermarks and schedule, and the claim against
the Curvine pool that backs it.

Watermarks are read with the eviction script's own parser (kvtier.podscripts.l2_evict, the file the
CronJob runs), so what this rule accepts the job accepts; schedules with the API server's grammar
(kvtier.validate.checks.cron).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from kvtier import quantity
from kvtier.podscripts import l2_evict
from kvtier.upstream import curvine_config
from kvtier.validate.checks import cron
from kvtier.validate.checks.workload_rules import instance_facts
from kvtier.validate.rules import Hit, ValuesContext, rule
from kvtier.values import lookup, model_entries

EVICTION = ("cache", "l2", "eviction")
CHART_HIGH_WATERMARK = "85%"  # the umbrella's values.yaml: what an environment without one gets


def _eviction(values: dict[str, Any]) -> dict[str, Any] | None:
    """The eviction settings when the chart renders the eviction CronJob."""
    l2 = lookup(values, "cache", "l2") or {}
    eviction = l2.get("eviction") if isinstance(l2, dict) else None
    if not l2.get("enabled", True) or not isinstance(eviction, dict) or not eviction.get("enabled", True):
        return None
    return eviction


def _capacity(values: dict[str, Any], eviction: dict[str, Any]) -> tuple[Any, tuple[str, ...]]:
    """The eviction job's --capacity as the chart passes it (eviction.capacity, else claim.size), and
    its values key."""
    if eviction.get("capacity"):
        return eviction["capacity"], (*EVICTION, "capacity")
    return lookup(values, "cache", "l2", "claim", "size"), ("cache", "l2", "claim", "size")


def _chunk_floor(values: dict[str, Any]) -> int:
    """The fewest bytes one L2 chunk file holds: cache.chunkSize tokens of KV at the bundle's own figure of
    KV bytes per token (metrics.dashboard.kvBytesPerToken), without the file's header or page rounding;
    1 when either is unknown (then only a 0-byte watermark is below it)."""
    tokens = lookup(values, "cache", "chunkSize")
    per_token = lookup(values, "metrics", "dashboard", "kvBytesPerToken")
    if isinstance(tokens, int) and isinstance(per_token, int) and tokens > 0 and per_token > 0:
        return tokens * per_token
    return 1


def _as_percentage(text: str) -> str:
    """A hint for a watermark written as a ratio (Alluxio's 0.9) or a bare number: the percentage meant."""
    try:
        ratio = float(text)
    except ValueError:
        return "a percentage such as 85% or a size such as 400Gi"
    if 0 < ratio <= 1:
        return f'"{ratio * 100:g}%" (a ratio such as {text} is not read as one)'
    return "a percentage such as 85% or a size with a unit such as 400Gi (a bare number is bytes)"


@rule(
    "eviction-watermarks",
    reason="the eviction job refuses a low watermark above the high one or a size it cannot read, reads a "
    "bare number (0.9) as bytes and then empties the L2 every run, and never starts above the volume's size",
    remedy="write cache.l2.eviction.highWatermark and lowWatermark as percentages (e.g. 85% and 70%) or "
    "sizes such as 400Gi, low <= high < the capacity (eviction.capacity, else claim.size)",
)
def watermarks(ctx: ValuesContext) -> Iterator[Hit]:
    """What kvtier.podscripts.l2_evict (the CronJob's script) does with the chart's arguments: --capacity is
    eviction.capacity or claim.size (templates/l2-eviction-cronjob.yaml); parse_watermark reads `N%` of it
    and anything else with parse_size, where a bare number is bytes and int() truncates "0.9" to 0; evict()
    removes chunks while the usage is above --high, down to --low."""
    eviction = _eviction(ctx.values)
    if eviction is None:
        return
    capacity_text, capacity_key = _capacity(ctx.values, eviction)
    try:
        capacity = l2_evict.parse_size(str(capacity_text))
    except l2_evict.UsageError as error:
        yield Hit(f"the eviction job cannot read its capacity: {error}", capacity_key)
        return
    floor = _chunk_floor(ctx.values)
    levels = {}
    for name in ("highWatermark", "lowWatermark"):
        if eviction.get(name) is None:
            continue  # unset: the chart's default applies (the effective values always hold one)
        text = str(eviction.get(name))
        try:
            levels[name] = level = l2_evict.parse_watermark(text, capacity)
        except l2_evict.UsageError as error:
            yield Hit(f"the eviction job cannot read {name}: {error}", (*EVICTION, name))
            continue
        if level < floor:
            chunk = f"one chunk file ({floor:,} B)" if floor > 1 else "one byte"
            yield Hit(
                f"cache.l2.eviction.{name} {text!r} is read by l2_evict.py as {level:,} bytes, less than "
                f"{chunk}: every run evicts the whole L2; write {_as_percentage(text)}",
                (*EVICTION, name),
            )
    if len(levels) < 2:
        return
    high, low = levels["highWatermark"], levels["lowWatermark"]
    if low > high:
        yield Hit(
            f"lowWatermark {eviction['lowWatermark']} ({low / 2**30:.1f} GiB) is above highWatermark "
            f"{eviction['highWatermark']} ({high / 2**30:.1f} GiB)",
            (*EVICTION, "lowWatermark"),
        )
    if high >= capacity:
        # The capacity is the volume's size when it is given (eviction.capacity) or is the size of the claim
        # the chart creates; an existingClaim's size is not in the values, so claim.size may not be it.
        existing = lookup(ctx.values, "cache", "l2", "claim", "existingClaim")
        known = bool(eviction.get("capacity")) or not existing
        source = "cache.l2.eviction.capacity" if eviction.get("capacity") else "cache.l2.claim.size"
        yield Hit(
            f"cache.l2.eviction.highWatermark {eviction['highWatermark']} ({high / 2**30:.1f} GiB) is at or "
            f"above the capacity {capacity_text} ({source}): the usage never exceeds it, so eviction never "
            "starts and the L2 fills until writes fail"
            + ("" if known else " (claim.size may not be the size of cache.l2.claim.existingClaim)")
            + (
                ""
                if eviction.get("capacity")
                else "; Curvine does not enforce the claim's size: this holds only if the pool is that small"
            ),
            (*EVICTION, "highWatermark"),
            # An error against the size the user declares for the volume (eviction.capacity); a warning
            # against claim.size: Curvine (like most ReadWriteMany file systems) does not hold a claim to
            # its size, so the usage can pass it on a larger pool.
            severity="error" if eviction.get("capacity") else "warning",
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


def pool_per_node(values: dict[str, Any]) -> tuple[int, int] | None:
    """(bytes of Curvine data dirs per node after dirReserved, GPU nodes the models fill) when both are
    known: every data dir has a capacity and every instance type is known. The nodes are the fewest the
    models fill, so the pool is a lower bound (workers may run on more nodes)."""
    curvine = values.get("curvine") or {}
    if not isinstance(curvine, dict) or not curvine.get("enabled", True):
        return None
    if not lookup(values, "cache", "l2", "enabled", default=True):
        return None
    dirs = lookup(curvine, "worker", "dataDirs") or []
    capacities = [
        curvine_config.size_bytes(d.get("capacity")) if isinstance(d, dict) and d.get("capacity") else None
        for d in dirs
    ]
    reserved = curvine_config.size_bytes(lookup(curvine, "worker", "dirReserved", default="0")) or 0
    nodes = engine_nodes(values)
    if not dirs or None in capacities or nodes is None:
        return None  # a data dir of unknown size (the whole filesystem) or nodes of unknown type: no estimate
    return sum(max(c - reserved, 0) for c in capacities if c is not None), nodes


@rule(
    "l2-claim-within-pool",
    reason="Curvine does not enforce a claim's size: a claim larger than the workers' data dirs lets LMCache "
    "write until the pool is full, and every L2 write fails after that",
    remedy="give curvine.worker.dataDirs capacities that add up (times the nodes with workers) to more "
    "than cache.l2.claim.size, or lower the claim",
)
def claim_within_pool(ctx: ValuesContext) -> Iterator[Hit]:
    claim = lookup(ctx.values, "cache", "l2", "claim", "size")
    size = quantity.try_parse(claim)
    pool = pool_per_node(ctx.values)
    if size is None or pool is None:
        return
    per_node, nodes = pool
    if size > per_node * nodes:
        yield Hit(
            f"cache.l2.claim.size {claim} is more than the pool of "
            f"the {nodes} GPU node(s) the models fill ({per_node / 2**30:.0f} GiB each after dirReserved)",
            ("cache", "l2", "claim", "size"),
            severity="warning",
        )


@rule(
    "eviction-starts-within-pool",
    reason="the eviction job starts only above its high watermark (a percentage of eviction.capacity, else "
    "of claim.size, or a size); above the Curvine pool's size the usage never gets there: the pool fills "
    "and every L2 write fails while eviction waits",
    remedy="set cache.l2.eviction.capacity (or the claim size) to the pool's size, or lower highWatermark",
)
def eviction_starts_within_pool(ctx: ValuesContext) -> Iterator[Hit]:
    eviction = _eviction(ctx.values)
    pool = pool_per_node(ctx.values)
    if eviction is None or pool is None:
        return
    per_node, nodes = pool
    capacity_text, _ = _capacity(ctx.values, eviction)
    try:
        capacity = l2_evict.parse_size(str(capacity_text))
        high_text = str(eviction.get("highWatermark") or CHART_HIGH_WATERMARK)
        high = l2_evict.parse_watermark(high_text, capacity)
    except l2_evict.UsageError:
        return  # eviction-watermarks reports what the job cannot read
    if high > per_node * nodes:
        source = "eviction.capacity" if eviction.get("capacity") else "claim.size"
        yield Hit(
            f"cache.l2.eviction.highWatermark {high_text} of {capacity_text} ({source}) "
            f"is {high / 2**30:.0f} GiB, more than the pool of the {nodes} GPU node(s) the models fill "
            f"({per_node / 2**30:.0f} GiB each after dirReserved): eviction would start only after the "
            "pool is full",
            (*EVICTION, "capacity") if eviction.get("capacity") else (*EVICTION, "highWatermark"),
            severity="warning",
        )
