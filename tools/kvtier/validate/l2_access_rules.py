"""Rule: the engines' UID/GID can write the directory Curvine's CSI controller creates for the L2 claim.

curvine-cli (run by the controller) records its own UID/GID as the owner of each new volume directory
and `0777 & ~umask` as its mode; curvine-fuse mounts with `default_permissions`, so the kernel enforces
both for every pod (CurvineIO/curvine v0.4.1 `curvine-cli/src/cmds/fs/mkdir.rs`, `common.rs`,
`crates/common/curvine-config/src/fuse_conf.rs`). The chart runs the controller as
`curvine.csi.volumeAccess.uid/gid` with the umask of its `mode`; the engines, the eviction CronJob and
the test pods all run as `engine.podSecurityContext`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kvtier.validate.rules import Hit, ValuesContext, rule
from kvtier.validate.values_rules import lookup

MODE_BITS = {"owner": "0755", "group": "0775", "world": "0777"}


def _uses_this_releases_curvine(values: dict[str, Any]) -> bool:
    """The L2 claim is provisioned by this release's Curvine CSI controller (whose settings we know)."""
    l2 = lookup(values, "cache", "l2", default={}) or {}
    claim = l2.get("claim") or {}
    return bool(
        l2.get("enabled")
        and lookup(values, "curvine", "enabled", default=False)
        and lookup(values, "curvine", "csi", "enabled", default=True)
        and not claim.get("existingClaim")
        and not claim.get("storageClassName")
    )


def write_denied(pod: dict[str, Any], access: dict[str, Any]) -> str | None:
    """Why a pod with this pod security context cannot write a directory made with `access`, or None."""
    mode = access.get("mode", "group")
    if mode == "world":
        return None
    uid = pod.get("runAsUser")
    if uid is None:
        return "engine.podSecurityContext.runAsUser is unset, so the engines run as the image's UID"
    if uid == access.get("uid"):
        return None
    groups = [pod[k] for k in ("runAsGroup", "fsGroup") if pod.get(k) is not None]
    groups += list(pod.get("supplementalGroups") or [])
    if mode == "group" and access.get("gid") in groups:
        return None
    return (
        f"the engines run as UID {uid} with groups {groups or 'none'}, but each L2 directory is created as "
        f"{access.get('uid')}:{access.get('gid')} mode {MODE_BITS.get(mode, mode)} ({mode})"
    )


@rule(
    "l2-writable-by-engines",
    reason="curvine-fuse enforces the L2 directory's owner and mode: engines that cannot write it lose every "
    "L2 write while all pods stay healthy",
    remedy="set curvine.csi.volumeAccess.uid to engine.podSecurityContext.runAsUser and gid to its fsGroup "
    "(or mode: world to let any UID write)",
)
def l2_writable(ctx: ValuesContext) -> Iterator[Hit]:
    if not _uses_this_releases_curvine(ctx.values):
        return
    pod = lookup(ctx.values, "engine", "podSecurityContext")
    access = lookup(ctx.values, "curvine", "csi", "volumeAccess")
    if not isinstance(access, dict):
        return  # nothing to compare with (the effective values always carry the chart's default)
    reason = write_denied(pod if isinstance(pod, dict) else {}, access)
    if reason is None:
        return
    in_file = ctx.loaded.marks
    at: tuple[str, ...] = ("curvine", "csi", "volumeAccess")
    if at not in in_file and ("engine", "podSecurityContext") in in_file:
        at = ("engine", "podSecurityContext")
    yield Hit(f"{reason}: they cannot write the L2", at)
