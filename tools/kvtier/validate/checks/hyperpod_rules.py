"""Rules of the HyperPod target: what the operator version of `hyperpod.operator.version` accepts.

Facts (operator versions, what v3.7 added) are in kvtier.upstream.hyperpod_fields; the chart refuses the
same combinations at render time (templates/_hyperpod.tpl, `hyperpod.checkOperator`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from kvtier.upstream import hyperpod_fields as facts
from kvtier.validate.rules import Hit, ValuesContext, rule
from kvtier.values import lookup

# ASCII digits only: a tag has no others (kvtier.images.reference), though Python's \d matches any.
SEMVER_TAG = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)", re.ASCII)


def _multiprocess(values: dict) -> bool:
    """Target hyperpod with the operator's LMCache server sidecar (hyperpod.lmcache.mode MultiProcess)."""
    return (
        lookup(values, "target") == "hyperpod"
        and lookup(values, "hyperpod", "lmcache", "mode") == "MultiProcess"
    )


def _older(version: str, since: str) -> bool:
    try:
        return facts.version_key(version) < facts.version_key(since)
    except ValueError:
        return False  # not a version: the schema reports it


@rule(
    "hyperpod-operator-supports",
    reason="an operator older than 3.7 has no tolerations or lmcache.mode field: the API server prunes "
    "them silently (no toleration, LMCache in-process) and the L2 patch looks for a sidecar that never comes",
    remedy='upgrade the operator to 3.7 and set hyperpod.operator.version: "3.7", or leave '
    "hyperpod.tolerations empty and hyperpod.lmcache.mode InProcess",
)
def operator_supports(ctx: ValuesContext) -> Iterator[Hit]:
    if lookup(ctx.values, "target") != "hyperpod":
        return
    version = str(lookup(ctx.values, "hyperpod", "operator", "version", default=facts.NEWEST))
    mode = lookup(ctx.values, "hyperpod", "lmcache", "mode", default="InProcess")
    if mode == "MultiProcess" and _older(version, facts.MULTIPROCESS_SINCE):
        yield Hit(
            f"hyperpod.lmcache.mode MultiProcess needs operator >= {facts.MULTIPROCESS_SINCE}; "
            f"hyperpod.operator.version is {version}",
            ("hyperpod", "lmcache", "mode"),
        )
    if lookup(ctx.values, "hyperpod", "tolerations") and _older(version, facts.TOLERATIONS_SINCE):
        yield Hit(
            f"hyperpod.tolerations needs operator >= {facts.TOLERATIONS_SINCE}; "
            f"hyperpod.operator.version is {version}",
            ("hyperpod", "tolerations"),
        )


@rule(
    "hyperpod-multiprocess-lmcache",
    reason="the operator's MultiProcess mode runs LMCache's server from the worker image, which needs "
    "LMCache >= 0.5.0; an older image has no multi-process server",
    remedy="use a worker image with LMCache >= 0.5.0 (hyperpod.worker.image.tag, e.g. v0.5.5) or "
    "hyperpod.lmcache.mode: InProcess",
)
def multiprocess_lmcache(ctx: ValuesContext) -> Iterator[Hit]:
    if not _multiprocess(ctx.values):
        return
    tag = str(lookup(ctx.values, "hyperpod", "worker", "image", "tag", default=""))
    found = SEMVER_TAG.match(tag)
    if found and tuple(int(g) for g in found.groups()) < facts.MULTIPROCESS_MIN_LMCACHE:
        least = ".".join(map(str, facts.MULTIPROCESS_MIN_LMCACHE))
        yield Hit(
            f"hyperpod.worker.image.tag {tag} is LMCache < {least}, which MultiProcess mode needs",
            ("hyperpod", "worker", "image", "tag"),
        )


@rule(
    "hyperpod-tenant-isolation",
    reason="the operator renders LMCache's own InProcess connector, which keys L1/L2 chunks on tokens "
    "alone: a request's cache_salt keeps L0 apart but not the tiers this bundle adds, so one tenant is "
    "served the KV another's request wrote (docs/security.md); the chart refuses it (hyperpod.checkOperator)",
    remedy="set hyperpod.lmcache.mode: MultiProcess (operator >= 3.7; LMCache's multi-process keys carry "
    "the salt), or cache.tenantIsolation: false for a release that serves one tenant",
)
def tenant_isolation(ctx: ValuesContext) -> Iterator[Hit]:
    values = ctx.values
    if (
        lookup(values, "target") != "hyperpod"
        or lookup(values, "cache", "tenantIsolation", default=True) is not True
    ):
        return
    offloads = any(lookup(values, "cache", tier, "enabled") is True for tier in ("l1", "l2"))
    lmcache = lookup(values, "cache", "backend", default="lmcache") == "lmcache"
    if lmcache and offloads and not _multiprocess(values):
        yield Hit(
            "cache.tenantIsolation is on, but the operator's InProcess LMCache connector keys L1/L2 "
            "chunks on tokens alone, so tenants' cache_salt cannot keep them apart",
            ("cache", "tenantIsolation"),
        )


@rule(
    "hyperpod-api-key",
    reason="on target hyperpod the operator renders the engine pods, which the chart cannot give the "
    "auth.apiKeySecret key: the chart refuses it rather than leave the engines open while the values say "
    "otherwise",
    remedy="leave auth.apiKeySecret.name empty on target hyperpod and authenticate at the endpoint's gateway",
)
def api_key_on_hyperpod(ctx: ValuesContext) -> Iterator[Hit]:
    if lookup(ctx.values, "target") == "hyperpod" and lookup(ctx.values, "auth", "apiKeySecret", "name"):
        yield Hit(
            "auth.apiKeySecret.name is set on target hyperpod, where the operator renders the engine pods",
            ("auth", "apiKeySecret", "name"),
        )


@rule(
    "hyperpod-multiprocess-record-hits",
    reason="in MultiProcess mode the operator's LMCache server sidecar takes its L2 from `--l2-adapter`, "
    "which the patch points at LMCache's fs adapter or the bundle's sealed one (cache.l2.integrity); "
    "neither records hits: the hit recorder is the InProcess L2 plugin, so eviction orders those chunks "
    "by write time (docs/eviction.md)",
    remedy="set cache.l2.eviction.recordHits: false to state that this release evicts by write time, or "
    "use hyperpod.lmcache.mode: InProcess",
)
def multiprocess_record_hits(ctx: ValuesContext) -> Iterator[Hit]:
    values = ctx.values
    if not _multiprocess(values):
        return
    if (
        lookup(values, "cache", "l2", "enabled") is True
        and lookup(values, "cache", "l2", "eviction", "recordHits", default=False) is True
    ):
        yield Hit(
            "cache.l2.eviction.recordHits is on, but hyperpod.lmcache.mode MultiProcess loads no hit "
            "recorder",
            ("cache", "l2", "eviction", "recordHits"),
            severity="warning",
        )
