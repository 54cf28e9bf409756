"""Rules on the Curvine pool the release installs: its memory tier against the worker's memory limit, its disk
tier against the instance store, where its workers and CSI node plugin may run, and whether the L2 claim is on
it at all.

Curvine's values are under `curvine` (the subchart charts/curvine); sizes in its data dirs are read as
Curvine v0.4.1 reads them (kvtier.upstream.curvine_config.size_bytes: ByteUnit, binary units, 32GB = 32 GiB),
Kubernetes quantities with kvtier.quantity (apimachinery's resource.Quantity).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

from kvtier import facts as shipped
from kvtier import quantity
from kvtier.upstream import curvine_config, curvine_fuse
from kvtier.validate.rules import Hit, ValuesContext, rule
from kvtier.values import INSTANCE_LABEL, lookup, model_entries

WORKER = ("curvine", "worker")
# The taint effects that keep a pod off a node (PreferNoSchedule does not).
BLOCKING = ("NoSchedule", "NoExecute")


def _curvine_on(values: dict[str, Any]) -> bool:
    return bool(lookup(values, "curvine", "enabled", default=False))


def _gib(n: float | Fraction) -> str:
    return f"{float(n) / 2**30:.1f} GiB"


@rule(
    "curvine-mem-tier-within-limit",
    reason="a MEM data dir is tmpfs, whose pages are charged to the worker container's memory cgroup: a MEM "
    "tier as large as curvine.worker.resources.limits.memory gets the worker OOM-killed and its blocks lost",
    remedy="give each MEM entry of curvine.worker.dataDirs a capacity whose sum (less dirReserved) stays "
    "below curvine.worker.resources.limits.memory by at least the worker's own memory request, or raise the "
    "limit",
)
def mem_tier_within_limit(ctx: ValuesContext) -> Iterator[Hit]:
    """Linux charges shmem/tmpfs pages to the memory cgroup of the task that first touches them, and they stay
    charged while the file exists (Documentation/admin-guide/cgroup-v2.rst, "Memory Ownership": "A memory
    area is charged to the cgroup which instantiated it"; memory.stat `shmem`; cgroup-v1/memory.txt 2.3
    "Shared pages are accounted on the basis of the first touch approach"); tmpfs pages cannot be reclaimed
    without swap, so at the limit the OOM killer kills the worker. The worker writes a [MEM:<capacity>] dir
    (charts/curvine templates/_helpers.tpl curvine.dataDirEntry, mounted by hostPath) up to its capacity less
    worker.dir_reserved (the project's reading of Curvine v0.4.1 worker storage, as l2-claim-within-pool);
    without a capacity it fills the whole filesystem."""
    if not _curvine_on(ctx.values):
        return
    worker = lookup(ctx.values, *WORKER) or {}
    limit_text = lookup(worker, "resources", "limits", "memory")
    limit = quantity.try_parse(limit_text) if limit_text is not None else None
    if limit is None:
        return  # no memory limit: no cgroup limit to hit (the schema judges a malformed one)
    reserved = curvine_config.size_bytes(worker.get("dirReserved") or "0") or 0
    limit_key = ("curvine", "worker", "resources", "limits", "memory")
    total = 0
    first: tuple[str | int, ...] | None = None
    for j, d in enumerate(worker.get("dataDirs") or []):
        if not isinstance(d, dict) or str(d.get("type", "")).upper() != "MEM":
            continue
        at: tuple[str | int, ...] = (*WORKER, "dataDirs", j)
        if not d.get("capacity"):
            yield Hit(
                f"curvine.worker.dataDirs[{j}] ({d.get('path')}) is a MEM tier without a capacity: Curvine "
                f"fills the whole tmpfs, charged to the worker's memory limit {limit_text} "
                "(curvine.worker.resources.limits.memory); give it a capacity well below that limit",
                at,
            )
            return
        capacity = curvine_config.size_bytes(d.get("capacity"))
        if capacity is None:
            return  # a capacity Curvine cannot read: the schema and the config check report it
        total += max(capacity - reserved, 0)
        first = first or (*at, "capacity")
    if first is None:
        return
    if total >= limit:
        yield Hit(
            f"the MEM tiers of curvine.worker.dataDirs hold {_gib(total)} (capacities less dirReserved "
            f"{worker.get('dirReserved') or 0}) of tmpfs, charged to the worker container's memory cgroup, "
            f"which curvine.worker.resources.limits.memory caps at {limit_text} ({_gib(limit)}): the worker "
            "is OOM-killed before the tier is full; lower the MEM capacities or raise the limit",
            first,
        )
        return
    request = quantity.try_parse(lookup(worker, "resources", "requests", "memory"))
    if request is not None and limit - total < request:
        yield Hit(
            f"the MEM tiers of curvine.worker.dataDirs hold {_gib(total)} of tmpfs under the worker's memory "
            f"limit {limit_text}, leaving {_gib(limit - total)} for the worker itself, less than its memory "
            "request (curvine.worker.resources.requests.memory): it may be OOM-killed once the tier fills",
            limit_key,
            severity="warning",
        )


# The tolerations the DaemonSet controller adds to every DaemonSet pod (kubernetes
# pkg/controller/daemon/util/daemonset_util.go AddOrUpdateDaemonPodTolerations); network-unavailable
# only with hostNetwork.
_DAEMONSET_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]
_NETWORK_UNAVAILABLE = {
    "key": "node.kubernetes.io/network-unavailable",
    "operator": "Exists",
    "effect": "NoSchedule",
}


def _operator(t: dict[str, Any]) -> str:
    return str(t.get("operator") or "Equal")  # an empty operator is Equal (core/v1 Toleration)


def _covers(w: dict[str, Any], e: dict[str, Any], effect: str) -> bool:
    """Whether toleration `w` tolerates every taint with `effect` that toleration `e` tolerates, with the
    matching of k8s.io/api core/v1 toleration.go ToleratesTaint: an effect (empty: all) must equal the
    taint's, a key (empty, with Exists: all) must equal it, and Exists takes any value, Equal only its own."""
    if w.get("effect") and w.get("effect") != effect:
        return False
    if not w.get("key"):
        covered = _operator(w) == "Exists"
    elif w.get("key") != e.get("key") or not e.get("key"):
        covered = False
    elif _operator(w) == "Exists":
        covered = True
    else:  # Equal: only the one value, so only an Equal toleration of that same value
        covered = _operator(e) == "Equal" and str(w.get("value") or "") == str(e.get("value") or "")
    if covered and effect == "NoExecute" and w.get("tolerationSeconds") is not None:
        # A NoExecute toleration with tolerationSeconds evicts the pod that long after the taint appears.
        bound = e.get("tolerationSeconds")
        return bound is not None and int(bound) <= int(w["tolerationSeconds"])
    return covered


def _uncovered(engine: list[Any], daemon: list[Any]) -> Iterator[tuple[int, dict[str, Any], str]]:
    """(index, engine toleration, effect) of each blocking taint the engines tolerate, `daemon` does not."""
    for i, e in enumerate(engine):
        if not isinstance(e, dict):
            continue
        effects = [e["effect"]] if e.get("effect") else list(BLOCKING)
        for effect in effects:
            if effect in BLOCKING and not any(isinstance(w, dict) and _covers(w, e, effect) for w in daemon):
                yield i, e, effect


def _describe(t: dict[str, Any], effect: str) -> str:
    if not t.get("key"):
        return f"every taint ({effect})"
    value = "" if _operator(t) == "Exists" else f"={t.get('value') or ''}"
    return f"{t['key']}{value}:{effect}"


@rule(
    "curvine-daemons-tolerate-engine-taints",
    reason="the engines mount the L2 through the Curvine CSI node plugin on their node and write to the "
    "local worker: a node taint the engines tolerate and the worker or node plugin does not keeps it off",
    remedy="list in curvine.worker.tolerations and curvine.csi.node.tolerations every NoSchedule/NoExecute "
    "toleration of engine.tolerations (a list you set replaces the chart's, default included)",
)
def daemons_tolerate_engine_taints(ctx: ValuesContext) -> Iterator[Hit]:
    """For each blocking taint engine.tolerations lets the engine pods onto (target standalone:
    templates/_engine.tpl engineTolerations, engine.tolerations then the model's), the worker DaemonSet and
    the CSI node DaemonSet (charts/curvine worker-daemonset.yaml, csi-node-daemonset.yaml) must tolerate it
    too, their own tolerations plus those the DaemonSet controller adds. The models' own tolerations against
    the workers are curvine-workers-on-gpu-nodes'; against the node plugin they are checked here."""
    values = ctx.values
    if not _curvine_on(values) or not lookup(values, "cache", "l2", "enabled", default=True):
        return
    if lookup(values, "target", default="standalone") != "standalone":
        return
    engine = lookup(values, "engine", "tolerations") or []
    models = [(i, m.get("tolerations") or []) for i, m in model_entries(values)]
    worker = lookup(values, *WORKER) or {}
    worker_tolerations = list(worker.get("tolerations") or []) + _DAEMONSET_TOLERATIONS
    if worker.get("hostNetwork"):
        worker_tolerations.append(_NETWORK_UNAVAILABLE)
    for i, e, effect in _uncovered(engine if isinstance(engine, list) else [], worker_tolerations):
        yield Hit(
            f"engine.tolerations[{i}] lets the engines onto nodes tainted {_describe(e, effect)}; "
            "curvine.worker.tolerations does not tolerate it, so those nodes get no Curvine worker",
            (*WORKER, "tolerations"),
        )
    node = lookup(values, "curvine", "csi", "node", "tolerations")
    if not lookup(values, "curvine", "csi", "enabled", default=True) or not isinstance(node, list):
        return  # no node plugin from this release, or its tolerations are not in these values
    plugin = node + _DAEMONSET_TOLERATIONS
    sources = [("engine.tolerations", engine if isinstance(engine, list) else [])]
    sources += [(f"models[{i}].tolerations", t) for i, t in models if isinstance(t, list)]
    for name, tolerations in sources:
        for i, e, effect in _uncovered(tolerations, plugin):
            yield Hit(
                f"{name}[{i}] lets the engines onto nodes tainted {_describe(e, effect)}; "
                "curvine.csi.node.tolerations does not tolerate it, so the L2 volume cannot be mounted there",
                ("curvine", "csi", "node", "tolerations"),
            )


_RELEASE_CLASS = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?-curvine$")


@rule(
    "l2-claim-on-curvine",
    reason="with curvine.enabled, an L2 claim of another StorageClass is not on the Curvine pool the "
    "release installs (left unused), and a block class (EBS gp3) cannot provision ReadWriteMany (Pending)",
    remedy="leave cache.l2.claim.storageClassName empty (or equal to Curvine's StorageClass, "
    "curvine.storageClass.name or <release>-curvine), or set curvine.enabled=false to use another RWX class",
)
def claim_on_curvine(ctx: ValuesContext) -> Iterator[Hit]:
    """templates/_cache.tpl kv-tiered-inference.l2StorageClass: the created claim (no existingClaim) takes
    storageClassName when set, else this release's Curvine StorageClass, named curvine.storageClass.name or
    `<release>-curvine` (charts/curvine _helpers.tpl curvine.storageClassName). The release name is not in the
    values, so a `<name>-curvine` class passes when curvine.storageClass.name is empty."""
    values = ctx.values
    claim = lookup(values, "cache", "l2", "claim") or {}
    if not _curvine_on(values) or not lookup(values, "cache", "l2", "enabled", default=True):
        return
    if not isinstance(claim, dict) or claim.get("existingClaim") or not claim.get("storageClassName"):
        return
    if lookup(values, "curvine", "storageClass", "enabled", default=True) is False:
        return  # the release makes no StorageClass: the L2 class comes from elsewhere by design
    wanted = str(claim["storageClassName"])
    own = lookup(values, "curvine", "storageClass", "name") or ""
    if wanted == own or (not own and _RELEASE_CLASS.match(wanted)):
        return
    expected = f"{own!r} (curvine.storageClass.name)" if own else "'<release>-curvine'"
    yield Hit(
        f"cache.l2.claim.storageClassName is {wanted!r}, not this release's Curvine StorageClass {expected}: "
        "the L2 is not on the Curvine pool curvine.enabled installs, and a block-only class cannot provision "
        "its ReadWriteMany claim; leave storageClassName empty or set curvine.enabled=false",
        ("cache", "l2", "claim", "storageClassName"),
    )


# Where the DLAMI (and HyperPod's node images) mount the instance store's NVMe disks, as one RAID 0 volume:
# a data dir under it lives on the instance store (values/prod-g6e-4xlarge.yaml, docs/hyperpod.md).
INSTANCE_STORE_MOUNT = "/opt/dlami/nvme"
DISK_TIERS = ("SSD", "HDD", "DISK")


@rule(
    "curvine-worker-local-to-its-disk",
    reason="a Curvine worker outside its node's network registers under its pod address, which never matches "
    "the FUSE clients' hostname (the node name): the master places no block on the engine's own node and no "
    "read is short-circuited to the block files, so every L2 chunk crosses the worker's RPC (cross-pod chunk "
    "reads measured 9x a local disk's, against 1.18x in the node's network: docs/curvine-fuse.md)",
    remedy="set curvine.worker.hostNetwork=true with curvine.networkPolicy.nodeCIDRs (the nodes' address "
    "ranges), as values/prod-g6e-4xlarge.yaml does",
)
def worker_local_to_its_disk(ctx: ValuesContext) -> Iterator[Hit]:
    """Only for data dirs on the instance store (INSTANCE_STORE_MOUNT): those are the engines' GPU nodes,
    where locality is the point of the tier. A warning: the reads still return the right bytes, slower. The
    locality facts are Curvine v0.4.1's (docs/curvine-fuse.md, Chunk I/O: the `local` worker policy and
    `config.shortCircuit` compare the worker's registered host name with the client's)."""
    if not _curvine_on(ctx.values) or not lookup(ctx.values, "cache", "l2", "enabled", default=True):
        return
    worker = lookup(ctx.values, *WORKER, default={}) or {}
    if not isinstance(worker, dict) or worker.get("hostNetwork"):
        return
    dirs = worker.get("dataDirs")
    for j, d in enumerate(dirs if isinstance(dirs, list) else []):
        if isinstance(d, dict) and str(d.get("path") or "").rstrip("/").startswith(INSTANCE_STORE_MOUNT):
            yield Hit(
                f"curvine.worker.dataDirs[{j}] is on the nodes' instance store ({d.get('path')}), but "
                "curvine.worker.hostNetwork is false: the workers register under their pod addresses, so no "
                "L2 block is written to or read from the engine's own node directly and every chunk crosses "
                "the worker's RPC (9x slower cross-pod reads measured, docs/curvine-fuse.md); set "
                "curvine.worker.hostNetwork=true and curvine.networkPolicy.nodeCIDRs",
                (*WORKER, "hostNetwork"),
                severity="warning",
            )
            return


def _store_gb(instance_type: str) -> int | None:
    found = shipped.instance_type(instance_type)
    return found.instance_store_gb if found else None


@rule(
    "curvine-data-dirs-fit-instance-store",
    reason="Curvine workers advertise each data dir's capacity to the master, which places L2 blocks up to "
    "it: a capacity (plus dirReserved) above the instance store the dir lives on fills the disk, and writes "
    "fail with no space left, or a node without an instance store writes the L2 to its root volume",
    remedy="keep the capacities of curvine.worker.dataDirs under /opt/dlami/nvme (plus dirReserved) within "
    "the worker instance type's instance store, or choose an instance type with a larger one",
)
def data_dirs_fit_instance_store(ctx: ValuesContext) -> Iterator[Hit]:
    """The instance type comes from curvine.worker.nodeSelector's node.kubernetes.io/instance-type; sizes are
    AWS's GB (10**9) against Curvine's binary units (kvtier.upstream.curvine_config.size_bytes)."""
    if not _curvine_on(ctx.values):
        return
    worker = lookup(ctx.values, *WORKER, default={}) or {}
    selector = worker.get("nodeSelector") if isinstance(worker, dict) else None
    instance = str(selector.get(INSTANCE_LABEL) or "") if isinstance(selector, dict) else ""
    dirs = worker.get("dataDirs") if isinstance(worker, dict) else None
    on_store = [
        (j, d)
        for j, d in enumerate(dirs if isinstance(dirs, list) else [])
        if isinstance(d, dict)
        and str(d.get("type") or "SSD").upper() in DISK_TIERS
        and str(d.get("path") or "").rstrip("/").startswith(INSTANCE_STORE_MOUNT)
    ]
    if not instance or not on_store:
        return
    store_gb = _store_gb(instance)
    if store_gb is None:
        yield Hit(
            f"curvine workers run on {instance}, whose instance store size validate does not know "
            "(tools/kvtier/facts/instances.yaml): the capacities of curvine.worker.dataDirs under "
            f"{INSTANCE_STORE_MOUNT} are not checked against it; compare them with the instance type's "
            "'Instance storage' on AWS's instance type page (or lsblk on a node)",
            ("curvine", "worker", "nodeSelector", INSTANCE_LABEL),
            severity="warning",
        )
        return
    reserved = curvine_config.size_bytes(worker.get("dirReserved") or 0) or 0
    sizes = [(j, curvine_config.size_bytes(d.get("capacity"))) for j, d in on_store if d.get("capacity")]
    if any(size is None for _, size in sizes):
        return  # a capacity Curvine cannot read: the schema and the config check report it
    store = store_gb * 10**9
    wanted = sum(int(size or 0) + reserved for _, size in sizes)
    if store == 0:
        yield Hit(
            f"curvine.worker.dataDirs[{on_store[0][0]}] is under {INSTANCE_STORE_MOUNT}, but the workers' "
            f"instance type {instance} has no instance store (EBS only): the L2 would fill the root volume",
            ("curvine", "worker", "dataDirs", on_store[0][0], "path"),
            unconfirmed=shipped.unconfirmed_instance(instance, ("instance_store_gb",)),
        )
    elif sizes and wanted > store:
        j = sizes[-1][0]
        yield Hit(
            f"curvine.worker.dataDirs under {INSTANCE_STORE_MOUNT} ask for {_gib(wanted)} (capacity plus "
            f"dirReserved {_gib(reserved)} each), more than {instance}'s {store_gb} GB instance store "
            f"({_gib(store)})",
            ("curvine", "worker", "dataDirs", j, "capacity"),
            unconfirmed=shipped.unconfirmed_instance(instance, ("instance_store_gb",)),
        )


@rule(
    "curvine-fuse-parameters",
    reason="curvine-csi v0.4.1 forwards each curvine.storageClass.fuseParameters entry to curvine-fuse as "
    "`--<key> <value>` and runs `curvine-fuse validate-config` with them when it provisions a volume and "
    "before each mount: a flag curvine-fuse does not have, a value its parser or FuseConf::init refuses, and "
    "no L2 claim of the class is ever provisioned (the claim stays Pending) or mounted",
    remedy="use only flags `curvine-fuse list-config-flags` lists, with values it takes (true or false, "
    "whole numbers for counts, sizes such as 64MB, durations such as 30s; congestion-threshold at most "
    "max-background, default 192 of 256; not direct-io with write-back-cache)",
)
def fuse_parameters(ctx: ValuesContext) -> Iterator[Hit]:
    """kvtier.upstream.curvine_fuse models curvine-fuse v0.4.1's argument parser, FuseConf::init and
    ClientConf::init from its source (curvine-csi/pkg/csi/fuse_cli.go, controller.go CreateVolume;
    curvine-fuse/src/cli/mount_args.rs; crates/common/curvine-config/src/fuse_conf.rs, client_conf.rs),
    held to the real binary by tests/unit/test_curvine_fuse_parameters.py. The chart renders the
    StorageClass only with curvine.storageClass.enabled (charts/curvine storage-storageclass.yaml)."""
    if not _curvine_on(ctx.values) or not lookup(
        ctx.values, "curvine", "storageClass", "enabled", default=True
    ):
        return
    params = lookup(ctx.values, "curvine", "storageClass", "fuseParameters") or {}
    if not isinstance(params, dict) or not all(isinstance(v, str) for v in params.values()):
        return  # the schema reports a parameter that is not a string
    for wrong in curvine_fuse.refusals({str(k): v for k, v in params.items()}):
        yield Hit(
            f"curvine.storageClass.fuseParameters.{wrong.key}: {wrong.why} (curvine-fuse "
            f"{curvine_fuse.VERSION}); curvine-csi passes it to every curvine-fuse run, so the class's "
            "L2 claims are never provisioned (Pending) or mounted",
            ("curvine", "storageClass", "fuseParameters", wrong.key),
        )
