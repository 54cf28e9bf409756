"""charts/curvine laid out over every node of a multi-node real-node cluster as values/prod-*.yaml lay it
out over their GPU nodes (curvine_release.install(spread=True) uses it).

What changes against the one-node overlay (curvine_release.overlay), and why:

- three masters, a Raft group, as every production file has. The chart's `hard` anti-affinity cannot place
  three on two nodes (the third stays Pending); the production files for two GPU nodes set `soft` for that
  reason (values/prod-g6e-4xlarge.yaml), and so does this layout. Each master's volume is a hostPath
  PersistentVolume in its node's own folder (realconfig.NODE_LOCAL_DIR) with a node affinity, as a local or
  zonal volume pins a master in production: master i on node i mod n, so the 2 + 1 spread that `soft`
  anti-affinity scores for is also where the volumes are, and a restarted master comes back to its data;
- a worker on each node (the DaemonSet), in the node's network, on that node's own folder at the same path
  on every node, so one `worker.dataDirs` entry serves both as the instance store's mount does;
- the chart's own ReadWriteMany claim (`pvc.enabled`), so its cross-node `helm test` Job renders, and the
  workers test waits for a worker per node (`tests.minWorkers`).
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from kvtier.cluster.realnode import config as realconfig
from kvtier.cluster.realnode import lifecycle as realnode

MASTERS = 3  # values/prod-*.yaml: a Raft quorum that survives one master's loss
WORKER_DATA = "worker-data"


def _inside(ns: str) -> PurePosixPath:
    """The release's folder as every node sees it (each node binds its own folder there)."""
    return PurePosixPath(realconfig.NODE_LOCAL_DIR) / f"curvine-{ns}"


def host_folder(cluster: realnode.RealCluster, node: realconfig.Node, ns: str) -> Path:
    """Where `node`'s folder of the release lies on this machine (its NODE_LOCAL_DIR's source)."""
    return node.home(realnode.layout(cluster.name)).root / "local" / f"curvine-{ns}"


def overlay(one_node: dict[str, Any], cluster: realnode.RealCluster, ns: str) -> dict[str, Any]:
    """`one_node` (curvine_release.overlay's values) changed into the production layout over the cluster's
    nodes (the module docstring says why)."""
    values = copy.deepcopy(one_node)
    values["master"].update(replicas=MASTERS, antiAffinity="soft", pdb={"enabled": True})
    values["worker"]["dataDirs"][0]["path"] = str(_inside(ns) / WORKER_DATA)
    values["pvc"] = {"enabled": True, "size": "1Gi", "keep": False}
    values["tests"]["minWorkers"] = len(cluster.nodes)
    return values


def make_folders(cluster: realnode.RealCluster, ns: str) -> list[Path]:
    """Each node's folder of the release with the worker's data dir in it (the worker runs as root)."""
    made = []
    for node in cluster.nodes:
        folder = host_folder(cluster, node, ns)
        (folder / WORKER_DATA).mkdir(parents=True)
        made.append(folder)
    return made


def master_node(cluster: realnode.RealCluster, ordinal: int) -> realconfig.Node:
    return cluster.nodes[ordinal % len(cluster.nodes)]


def master_folder(
    cluster: realnode.RealCluster, ns: str, claim: str, ordinal: int, owner: int
) -> tuple[str, PurePosixPath]:
    """Master `ordinal`'s volume folder made in its node's folder, owned by `owner` (hostPath ignores
    fsGroup): (the node's name, the path inside the node)."""
    node = master_node(cluster, ordinal)
    folder = host_folder(cluster, node, ns) / claim
    folder.mkdir()
    shutil.chown(folder, owner, owner)
    return node.name, _inside(ns) / claim
