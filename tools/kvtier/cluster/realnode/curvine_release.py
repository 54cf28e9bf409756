"""charts/curvine installed with Helm on a real-node cluster, for the node tests and the tier benchmark: what
they add to run it there, and nothing else.

The chart runs as it renders, from the images curvine_images builds under the chart's own references. What
differs from a production install, and why:

- one master (one node: Raft's three would need three nodes with the chart's hard anti-affinity) on a
  hostPath PersistentVolume owned by the master's user (hostPath ignores fsGroup; nothing provisions here);
- one worker data dir, a folder of the cluster's own tree standing in for the instance store's NVMe (`SSD`,
  2GB, nothing reserved), instead of a mounted device;
- `csi.kubeletDir` is the real node's kubelet root (not /var/lib/kubelet), so the node plugin's mounts land
  where this kubelet publishes volumes;
- requests small enough that Curvine and two CPU engines fit two shared cores;
- no chart PVC, so its cross-node test Job (two pods on two nodes) is not rendered: this cluster has one
  node. The umbrella's L2 claim is the one the engines use.

Like values/prod-*.yaml, the worker runs in the node's network (`worker.hostNetwork`, with the node's range in
`networkPolicy.nodeCIDRs`): it registers under the node's name, which the cluster's DNS resolves (realnode's
CoreDNS `hosts`), so the node's FUSE clients read its blocks from disk (short-circuit). Without it every block
goes through the worker's RPC, 9x slower than the hostPath stand-in here (docs/curvine-fuse.md).

curvine-fuse sizes its splice pipes just over 1 MiB with F_SETPIPE_SZ, above the default
`fs.pipe-max-size`, which needs CAP_SYS_RESOURCE; this machine's kernel withholds it even from privileged
containers, and every FUSE read then fails with EIO. `raised_pipe_max_size` lifts the limit for the install's
lifetime and puts the old value back once no other user on the machine needs it (realnode.pipe_limit; a
cluster with the capability needs nothing: docs/cluster.md).

On a cluster of two nodes, `install(spread=True)` lays the release out as production does instead: three
masters, a worker per node, the chart's claim and its cross-node test (realnode.curvine_nodes says how).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from kvtier import helm, helmyaml, paths, waiting
from kvtier.cluster.realnode import config as realconfig
from kvtier.cluster.realnode import (
    curvine_images,
    curvine_nodes,
    diagnosis,
    images,
    netns,
    pipe_limit,
    umbrella_cpu,
)
from kvtier.cluster.realnode import lifecycle as realnode
from kvtier.cluster.realnode.client import Kube

CHART = paths.CHARTS / "curvine"
RELEASE = "cv"
STORAGE_CLASS = "kvtier-curvine"
MASTER_UID = 1000  # the chart's master runAsUser
DATA_CAPACITY = "2GB"
INSTALL_TIMEOUT = "10m"

SMALL = {"requests": {"cpu": "20m", "memory": "64Mi"}, "limits": {"memory": "1Gi"}}


@dataclass
class Installed:
    namespace: str
    release: str
    storage_class: str
    volumes: Path  # the node folder with the master's volume and the worker's data dir
    values: Path  # the overlay given to every helm install/upgrade of this release
    workers: int = 1  # live workers the master must report before the release counts as ready
    node_folders: tuple[Path, ...] = ()  # spread: each node's folder of the release (masters', worker's data)


def overlay(cluster: realnode.RealCluster, volumes: Path) -> dict[str, Any]:
    """The values this cluster needs on top of the chart's defaults (the module docstring says why)."""
    return {
        "master": {
            "replicas": 1,
            "antiAffinity": "none",
            "resources": SMALL,
            "persistence": {"size": "1Gi", "storageClassName": ""},
            "pdb": {"enabled": False},
        },
        "worker": {
            "dataDirs": [{"path": str(volumes / "worker-data"), "type": "SSD", "capacity": DATA_CAPACITY}],
            "dirReserved": "0",
            "resources": SMALL,
            # As every production environment in values/: the worker registers under the node's name, so
            # the node's FUSE clients read its blocks from disk (short-circuit), not through its RPC.
            "hostNetwork": True,
        },
        "networkPolicy": {"nodeCIDRs": [netns.NODE_CIDR]},
        "csi": {
            "kubeletDir": realconfig.KUBELET_DIR,
            "controller": {"resources": SMALL},
            "node": {"resources": {**SMALL, "limits": {"memory": "2Gi"}}},
        },
        "storageClass": {"name": STORAGE_CLASS},
        "tests": {"resources": SMALL},
    }


def raised_pipe_max_size() -> contextlib.AbstractContextManager[None]:
    """fs.pipe-max-size at least curvine-fuse's pipe size while the block runs, and while any other
    holder on this machine needs it (realnode.pipe_limit)."""
    return pipe_limit.raised()


def import_images(cluster: realnode.RealCluster, progress: images.Progress) -> None:
    """The chart's images into every node's containerd (each node has its own)."""
    umbrella_cpu.import_into_every_node(cluster, list(curvine_images.all_images(progress)), progress)


def _master_claims(release: str, ns: str, values_file: Path) -> list[tuple[str, int]]:
    """The claims the master StatefulSet's volumeClaimTemplates make (`<template>-<set>-<ordinal>`), each
    with its master's ordinal, read from the chart's render so a renamed template cannot leave one unbound."""
    rendered = helm.Template(CHART, release, [values_file], namespace=ns).render().manifests
    (master,) = [m for m in rendered if m["kind"] == "StatefulSet"]
    replicas = master["spec"]["replicas"]
    return [
        (f"{template['metadata']['name']}-{master['metadata']['name']}-{ordinal}", ordinal)
        for template in master["spec"]["volumeClaimTemplates"]
        for ordinal in range(replicas)
    ]


def _hostpath_volume(ns: str, claim: str, path: PurePath, node: str = "") -> dict[str, Any]:
    """A volume bound to `claim` at `path`; with `node`, only on that node (as a local volume)."""
    volume: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"{ns}-{claim}", "labels": {"kvtier.io/curvine-ns": ns}},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": {"namespace": ns, "name": claim},
            "hostPath": {"path": str(path), "type": "Directory"},
        },
    }
    if node:
        term = {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
        volume["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [term]}]}}
    return volume


def prepare(kube: Kube, ns: str, release: str = RELEASE, spread: bool = False) -> Installed:
    """The namespace (privileged: the node plugin mounts FUSE), the masters' volumes owned by their user,
    the worker's data dir and the overlay file; `spread`: production's layout over every node
    (realnode.curvine_nodes), each master's volume in its node's own folder."""
    kube.kubectl("create", "namespace", ns)
    kube.kubectl("label", "namespace", ns, "pod-security.kubernetes.io/enforce=privileged")
    cluster = kube.cluster
    volumes = realnode.layout(cluster.name).root / "volumes" / ns
    volumes.mkdir(parents=True)
    values = volumes / "overlay.yaml"
    folders: list[Path] = []
    if spread:
        folders = curvine_nodes.make_folders(cluster, ns)
        values.write_text(helmyaml.dump(curvine_nodes.overlay(overlay(cluster, volumes), cluster, ns)))
    else:
        (volumes / "worker-data").mkdir()
        values.write_text(helmyaml.dump(overlay(cluster, volumes)))
    pvs = []
    for claim, ordinal in _master_claims(release, ns, values):
        if spread:
            node, path = curvine_nodes.master_folder(cluster, ns, claim, ordinal, MASTER_UID)
            pvs.append(_hostpath_volume(ns, claim, path, node))
            continue
        folder = volumes / claim
        folder.mkdir()
        shutil.chown(folder, MASTER_UID, MASTER_UID)
        pvs.append(_hostpath_volume(ns, claim, folder))
    kube.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": pvs}))
    workers = len(cluster.nodes) if spread else 1
    return Installed(ns, release, STORAGE_CLASS, volumes, values, workers, tuple(folders))


def helm_upgrade(kube: Kube, installed: Installed, *extra: str, verb: str = "upgrade") -> None:
    """`helm3 <verb>` of the chart with the overlay, then until every pod is Ready; a failure's first line
    says why the pods are not Ready."""
    root = realnode.layout(kube.cluster.name).root
    with diagnosis.explained(kube, installed.namespace, root, f"helm {verb} of {installed.release}"):
        kube.helm(
            "helm3", verb, installed.release, str(CHART), "-n", installed.namespace,
            "-f", str(installed.values), *extra, "--wait", "--timeout", INSTALL_TIMEOUT, timeout=700,
        )  # fmt: skip
        wait_ready(kube, installed)


def wait_ready(kube: Kube, installed: Installed, timeout: float = 300) -> None:
    """Every workload of the release rolled out, and the master reporting its live workers (one per node
    when spread)."""
    for kind in ("statefulset", "daemonset", "deployment"):
        names = kube.kubectl(
            "get", kind, "-n", installed.namespace, "-l", f"app.kubernetes.io/instance={installed.release}",
            "-o", "name",
        ).split()  # fmt: skip
        for name in names:
            kube.run(
                [str(paths.TOOLS_BIN / "kubectl"), "rollout", "status", "-n", installed.namespace, name,
                 f"--timeout={timeout:.0f}s"],
                timeout=timeout + 30,
            )  # fmt: skip
    waiting.wait_until(
        lambda: live_workers(kube, installed) >= installed.workers,
        deadline=waiting.deadline_in(timeout),
        fail=lambda _: AssertionError(
            f"fewer than {installed.workers} live Curvine workers in {installed.namespace} in {timeout:.0f} s"
        ),
        interval=2,
    )


def master_pod(installed: Installed) -> str:
    return f"{installed.release}-curvine-master-0"


def live_workers(kube: Kube, installed: Installed) -> int:
    """The master's count of live workers (`live_worker_num` of `cv report` inside the master pod; its log
    lines go to stderr)."""
    report = kube.run(
        [str(paths.TOOLS_BIN / "kubectl"), "exec", "-n", installed.namespace, master_pod(installed), "--",
         "sh", "-c", f"{curvine_images.SERVER_HOME}/bin/cv report 2>/dev/null"],
        check=False,
    )  # fmt: skip
    found = re.search(r"live_worker_num\s*:\s*(\d+)", report)
    return int(found.group(1)) if found else 0


def install(
    kube: Kube, ns: str, progress: images.Progress, *extra: str, release: str = RELEASE, spread: bool = False
) -> Installed:
    """The images imported, then the chart installed with `extra` Helm arguments after the overlay (`--set
    worker.hostNetwork=true`) and Ready (call inside raised_pipe_max_size); `spread`: production's layout
    over every node of the cluster (realnode.curvine_nodes)."""
    import_images(kube.cluster, progress)
    installed = prepare(kube, ns, release, spread)
    helm_upgrade(kube, installed, *extra, verb="install")
    return installed


def remove(kube: Kube, installed: Installed) -> None:
    """The release (its FUSE mounts go with the node plugin), the namespace, the masters' volumes and data."""
    kube.helm("helm3", "uninstall", installed.release, "-n", installed.namespace, "--wait", check=False)
    kube.kubectl("delete", "namespace", installed.namespace, "--wait=false", check=False)
    kube.kubectl(
        "delete", "pv", "-l", f"kvtier.io/curvine-ns={installed.namespace}", "--wait=false", check=False
    )
    shutil.rmtree(installed.volumes, ignore_errors=True)
    for folder in installed.node_folders:
        shutil.rmtree(folder, ignore_errors=True)


def claim(ns: str, name: str, size: str = "1Gi") -> dict[str, Any]:
    """A ReadWriteMany claim on the release's StorageClass, as the engines' L2 is."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": STORAGE_CLASS,
            "resources": {"requests": {"storage": size}},
        },
    }


def consumer_pod(
    cluster: realnode.RealCluster, ns: str, name: str, claim_name: str, argv: list[str], node: str = ""
) -> dict:
    """A pod that runs `python3 <argv>` in the cluster's python image as the engines' user (umbrella_cpu.
    RUN_AS), with claim `claim_name` at /l2, and stops when it ends; on node `node` when given."""
    uid = umbrella_cpu.RUN_AS
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsUser": uid, "runAsGroup": uid, "fsGroup": uid},
            "containers": [
                {
                    "name": "run",
                    "image": cluster.images["python"],
                    "imagePullPolicy": "Never",
                    "command": ["python3", *argv],
                    "volumeMounts": [{"name": "l2", "mountPath": "/l2"}],
                }
            ],
            "volumes": [{"name": "l2", "persistentVolumeClaim": {"claimName": claim_name}}],
        },
    }
    if node:
        pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return pod
