"""Rules for the shared L2: the RWX claim, its provisioner, Curvine masters and workers, host paths, ports."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any

from kvtier.upstream import storage_provisioners
from kvtier.validate.rules import Hit, ValuesContext, rule
from kvtier.values import INSTANCE_LABEL, lookup, model_entries


@rule(
    "l2-rwx-claim",
    reason="every engine pod on every node mounts the same L2 volume, which needs ReadWriteMany",
    remedy="set cache.l2.claim.size (the chart creates an RWX claim) or an existingClaim that is RWX",
)
def l2_claim(ctx: ValuesContext) -> Iterator[Hit]:
    l2 = lookup(ctx.values, "cache", "l2")
    if not isinstance(l2, dict) or not l2.get("enabled"):
        return
    claim = l2.get("claim") or {}
    if not claim.get("existingClaim") and not claim.get("size"):
        yield Hit(
            "cache.l2 is enabled but has neither claim.size nor claim.existingClaim", ("cache", "l2", "claim")
        )
    modes = claim.get("accessModes")
    if isinstance(modes, list) and "ReadWriteMany" not in modes:
        yield Hit(
            f"cache.l2.claim.accessModes {modes} lacks ReadWriteMany", ("cache", "l2", "claim", "accessModes")
        )
    mount = l2.get("mountPath")
    if not isinstance(mount, str) or not mount.startswith("/"):
        yield Hit(f"cache.l2.mountPath {mount!r} is not an absolute path", ("cache", "l2", "mountPath"))


@rule(
    "l2-backend",
    reason="the L2 claim needs a provisioner: this release's Curvine, or an external RWX StorageClass",
    remedy="enable curvine (curvine.enabled: true) or name an external cache.l2.claim.storageClassName",
)
def l2_backend(ctx: ValuesContext) -> Iterator[Hit]:
    l2 = lookup(ctx.values, "cache", "l2")
    if not isinstance(l2, dict) or not l2.get("enabled"):
        return
    claim = l2.get("claim") or {}
    if claim.get("existingClaim") or claim.get("storageClassName"):
        return
    if not lookup(ctx.values, "curvine", "enabled", default=False):
        yield Hit(
            'cache.l2 uses this release\'s Curvine StorageClass (storageClassName "") but curvine.enabled '
            "is false",
            ("curvine", "enabled") if "curvine" in ctx.values else ("cache", "l2", "claim"),
        )
    elif lookup(ctx.values, "curvine", "storageClass", "enabled") is False:
        yield Hit(
            "cache.l2 needs the Curvine StorageClass but curvine.storageClass.enabled is false",
            ("curvine", "storageClass", "enabled"),
        )


@rule(
    "l2-storageclass-gives-rwx",
    reason="the L2 claim is ReadWriteMany (every engine pod on every node mounts it): a StorageClass whose "
    "provisioner gives block volumes (EBS) cannot provision it, the claim stays Pending and every engine pod "
    "with it never starts; the class's provisioner decides, its name is only a convention",
    remedy="name a class whose provisioner gives ReadWriteMany in cache.l2.claim.storageClassName (EFS "
    "efs.csi.aws.com, FSx for Lustre fsx.csi.aws.com) or leave it empty for this release's Curvine "
    "(curvine.enabled: true); for a class judged by its name, confirm its provisioner with `kubectl get "
    "storageclass NAME -o jsonpath='{.provisioner}'` or let validate read it (--server --context CONTEXT)",
)
def l2_storageclass_gives_rwx(ctx: ValuesContext) -> Iterator[Hit]:
    """Judged where the release's Curvine does not own the class: with curvine.enabled the release renders
    its own class (provisioner curvine, ReadWriteMany) and a claim on another one is l2-claim-on-curvine's.
    The class's provisioner, read on the judging cluster (ctx.storage_classes), decides: no ReadWriteMany
    is an error, an unknown provisioner a warning; a class missing on the release's cluster is a warning
    (the claim waits for it). Unread, the name alone is at most a warning that says which provisioner it
    conventionally stands for (kvtier.upstream.storage_provisioners) and how to confirm it."""
    l2 = lookup(ctx.values, "cache", "l2")
    if not isinstance(l2, dict) or not l2.get("enabled"):
        return
    claim = l2.get("claim") or {}
    if not isinstance(claim, dict) or claim.get("existingClaim") or not claim.get("storageClassName"):
        return
    curvine_class = lookup(ctx.values, "curvine", "storageClass", "enabled", default=True) is not False
    if lookup(ctx.values, "curvine", "enabled", default=False) and curvine_class:
        return
    name = str(claim["storageClassName"])
    read = ctx.storage_classes(name) if ctx.storage_classes is not None else None
    if read is not None and read.provisioner:
        yield from _judge_provisioner(name, read.provisioner, read.where)
    elif read is not None and read.absent:
        yield Hit(
            f"cache.l2.claim.storageClassName {name!r}: there is no StorageClass of that name on "
            f"{read.where}, so the L2 claim stays Pending (and every engine pod with it) until one is made; "
            f"expected a class that exists there and gives ReadWriteMany ({RWX_CLASSES}): `kubectl get "
            "storageclass` lists them",
            CLASS_PATH,
            severity="warning",
        )
    else:
        yield from _judge_name(name, read.problem if read is not None else "")


CLASS_PATH = ("cache", "l2", "claim", "storageClassName")
RWX_CLASSES = "a file system: EFS efs.csi.aws.com, FSx for Lustre fsx.csi.aws.com, NFS, Curvine"


def _modes(provisioner: str) -> str:
    return ", ".join(storage_provisioners.ACCESS_MODES[provisioner])


def _judge_provisioner(name: str, provisioner: str, where: str) -> Iterator[Hit]:
    """The class as the cluster serves it."""
    rwx = storage_provisioners.gives_rwx(provisioner)
    said = f"cache.l2.claim.storageClassName {name!r} is, on {where}, a StorageClass of {provisioner}"
    if rwx is False:
        yield Hit(
            f"{said}, whose volumes give only {_modes(provisioner)}: the L2's ReadWriteMany claim is never "
            f"provisioned (Pending); expected a class that gives ReadWriteMany ({RWX_CLASSES})",
            CLASS_PATH,
        )
    elif rwx is None:
        yield Hit(
            f"{said}, a provisioner validate does not know, so it cannot tell whether it gives "
            f"ReadWriteMany; check that it is {RWX_CLASSES}, not a block volume (EBS)",
            CLASS_PATH,
            severity="warning",
        )


def _judge_name(name: str, unread: str) -> Iterator[Hit]:
    """The class by its name only: a warning at most, since a cluster may give any name to any provisioner."""
    provisioner = storage_provisioners.provisioner_of(name)
    rwx = storage_provisioners.gives_rwx(provisioner) if provisioner else None
    if rwx is True:
        return
    confirm = (
        f"validate did not read the class ({unread or 'no cluster to read it on: offline'}); confirm with "
        f"`kubectl get storageclass {name} -o jsonpath='{{.provisioner}}'`, or let validate read it on the "
        "release's cluster (--server --context CONTEXT)"
    )
    if provisioner:
        yield Hit(
            f"cache.l2.claim.storageClassName {name!r} is by its name, on EKS and in the AWS drivers' "
            f"examples, a class of {provisioner}, whose volumes give only {_modes(provisioner)}: if it is, "
            f"the L2's ReadWriteMany claim is never provisioned (Pending). A name is a convention, not a "
            f"guarantee: {confirm}",
            CLASS_PATH,
            severity="warning",
        )
    else:
        yield Hit(
            f"cache.l2.claim.storageClassName {name!r}: validate does not know its provisioner, so cannot "
            f"tell whether it gives ReadWriteMany; {confirm}: expected {RWX_CLASSES}, not a block volume "
            "(EBS)",
            CLASS_PATH,
            severity="warning",
        )


@rule(
    "curvine-masters-odd",
    reason="Raft needs a majority: an even master count tolerates no more failures and can split votes",
    remedy="set curvine.master.replicas to 1, 3 or 5",
)
def masters_odd(ctx: ValuesContext) -> Iterator[Hit]:
    if not lookup(ctx.values, "curvine", "enabled", default=False):
        return
    replicas = lookup(ctx.values, "curvine", "master", "replicas")
    if isinstance(replicas, int) and replicas % 2 == 0:
        yield Hit(f"curvine.master.replicas is {replicas}, an even number", ("curvine", "master", "replicas"))


@rule(
    "curvine-masters-unchanged",
    reason="Curvine masters form a fixed Raft group: changing the count on upgrade breaks the journal",
    remedy="keep curvine.master.replicas at the deployed count (a new count needs a new install)",
)
def masters_unchanged(ctx: ValuesContext) -> Iterator[Hit]:
    if ctx.deployed is None or not lookup(ctx.values, "curvine", "enabled", default=False):
        return
    deployed = lookup(ctx.deployed, "curvine", "master", "replicas")
    wanted = lookup(ctx.values, "curvine", "master", "replicas")
    if deployed is not None and deployed != wanted:
        yield Hit(
            f"curvine.master.replicas {wanted} differs from the deployed release's {deployed}",
            ("curvine", "master", "replicas"),
        )


def _model_node_labels(model: dict[str, Any]) -> dict[str, str]:
    labels = {str(k): str(v) for k, v in (model.get("nodeSelector") or {}).items()}
    if model.get("instanceType"):
        labels.setdefault(INSTANCE_LABEL, str(model["instanceType"]))
    return labels


def _tolerates(tolerations: list[Any], wanted: dict[str, Any]) -> bool:
    for t in tolerations or []:
        if not isinstance(t, dict):
            continue
        if t.get("operator") == "Exists" and not t.get("key"):
            return True
        if (
            t.get("key") == wanted.get("key")
            and t.get("effect") in (None, "", wanted.get("effect"))
            and (t.get("operator") == "Exists" or t.get("value") == wanted.get("value"))
        ):
            return True
    return False


@rule(
    "curvine-workers-on-gpu-nodes",
    reason="L2 writes go to the local worker (worker_policy local): GPU nodes without one write remotely",
    remedy="make curvine.worker.nodeSelector a subset of each model's node labels and tolerate their taints",
)
def workers_on_gpu_nodes(ctx: ValuesContext) -> Iterator[Hit]:
    if not lookup(ctx.values, "curvine", "enabled", default=False) or not lookup(
        ctx.values, "cache", "l2", "enabled"
    ):
        return
    worker = lookup(ctx.values, "curvine", "worker", default={}) or {}
    selector = {str(k): str(v) for k, v in (worker.get("nodeSelector") or {}).items()}
    for i, model in model_entries(ctx.values):
        labels = _model_node_labels(model)
        for key, value in selector.items():
            if labels.get(key) != value:
                yield Hit(
                    f"curvine workers select {key}={value} but models[{i}] runs on nodes selected by "
                    f"{labels or 'any label'}: its nodes may have no worker",
                    ("curvine", "worker", "nodeSelector"),
                )
        for t in model.get("tolerations") or []:
            if isinstance(t, dict) and not _tolerates(worker.get("tolerations") or [], t):
                yield Hit(
                    f"models[{i}] tolerates taint {t.get('key')}:{t.get('effect')}; curvine workers do not, "
                    "so they cannot run on those GPU nodes",
                    ("curvine", "worker", "tolerations"),
                )


def _paths(tree: Any, at: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Every host path in the values: hostPath keys and Curvine worker data dirs."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            child = (*at, key)
            if key in ("hostPath", "kubeletDir") and isinstance(value, str):
                yield child, value
            elif key == "hostPath" and isinstance(value, dict) and isinstance(value.get("path"), str):
                yield (*child, "path"), value["path"]
            elif key == "dataDirs" and isinstance(value, list):
                for j, d in enumerate(value):
                    if isinstance(d, dict) and isinstance(d.get("path"), str):
                        yield (*child, j, "path"), d["path"]
            else:
                yield from _paths(value, child)
    elif isinstance(tree, list):
        for j, item in enumerate(tree):
            yield from _paths(item, (*at, j))


@rule(
    "hostpath-absolute",
    reason="a relative hostPath resolves against the kubelet's working directory, not the disk you meant",
    remedy="write host paths as absolute, normalised paths (e.g. /opt/dlami/nvme/curvine-data)",
)
def hostpath_absolute(ctx: ValuesContext) -> Iterator[Hit]:
    for path, value in _paths(ctx.values, ()):
        if (
            not value.startswith("/")
            or posixpath.normpath(value) != value.rstrip("/")
            or ".." in value.split("/")
        ):
            yield Hit(f"host path {value!r} is not an absolute, normalised path", path)


@rule(
    "curvine-web-ports",
    reason="Curvine's default web ports changed after v0.4.1 (9000/9001 -> 9001/9002): probes must not guess",
    remedy="set curvine.master.ports.web and curvine.worker.ports.web explicitly, and differently",
)
def web_ports(ctx: ValuesContext) -> Iterator[Hit]:
    if not lookup(ctx.values, "curvine", "enabled", default=False):
        return
    master = lookup(ctx.values, "curvine", "master", "ports", "web")
    worker = lookup(ctx.values, "curvine", "worker", "ports", "web")
    for role, port in (("master", master), ("worker", worker)):
        if not isinstance(port, int) or port <= 0:
            yield Hit(
                f"curvine.{role}.ports.web is {port!r}; set it explicitly", ("curvine", role, "ports", "web")
            )
    if isinstance(master, int) and master == worker:
        yield Hit(
            f"curvine master and worker web ports are both {master}", ("curvine", "worker", "ports", "web")
        )
