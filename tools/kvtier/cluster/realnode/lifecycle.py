"""The real-node flavour of the test cluster: pods run real processes (`kvtier cluster up --runtime real`).

This module is the cluster's lifecycle: `up` (or reuse), `down`, `status`. etcd, the control plane,
containerd, the kubelet and kube-proxy run inside a network namespace of their own (realnode.netns) and a
private mount namespace, all in one cgroup subtree below this process's own (realnode.cgroups);
realnode.start starts them in order. `up(nodes=2)` adds a second node (its own namespaces, containerd,
kubelet and kube-proxy, nested in the same subtree; realnode.netns.add_node joins it). While a cluster
is up the machine's own namespace refuses its addresses (realnode.routes). `down` kills every process of
that subtree (only what `up` started), removes the cgroups, the namespaces, those routes when no other
cluster is left, and the folder, and writes back the global sysctls the kubelet (or the Curvine tier)
changed, so the machine is as it was (realnode.machine).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kvtier.cluster.common import binaries
from kvtier.cluster.common.rest import Rest
from kvtier.cluster.realnode import cgroups as realcgroups
from kvtier.cluster.realnode import config as realconfig
from kvtier.cluster.realnode import images, machine, netns, nodebins, pipe_limit
from kvtier.cluster.realnode import routes as realroutes
from kvtier.cluster.realnode import start as realstart
from kvtier.errors import UserError

Progress = Callable[[str], None]


@dataclass(frozen=True)
class RealCluster:
    name: str
    kubeconfig: Path
    namespace: str  # the network namespace
    server: str
    version: str
    images: dict[str, str]  # image name -> reference in containerd
    started: bool
    nodes: tuple[realconfig.Node, ...] = ()

    def command(self, argv: list[str]) -> list[str]:
        """argv run as a client inside the cluster's network namespace."""
        return netns.command(self.namespace, argv)


def clusters_dir() -> Path:
    return realconfig.clusters_dir()


def layout(name: str) -> realconfig.Layout:
    return realconfig.layout(name)


def exists(name: str) -> bool:
    return (layout(name).root / "state.json").exists()


def preconditions() -> list[str]:
    """What this machine lacks to run a real node, each named (empty when nothing): README.md, Tests."""
    reasons = []
    if os.geteuid() != 0:
        reasons.append(
            f"needs root (runs as uid {os.geteuid()}; network namespaces, mounts, cgroups, routes)"
        )
    absent = nodebins.absent_host_commands()
    if absent:
        reasons.append(f"commands not found on PATH: {', '.join(absent)}")
    clashes = [] if "ip" in absent else realroutes.conflicts(realroutes.machine_routes())
    if clashes:
        reasons.append(f"this machine routes into the cluster's private ranges: {'; '.join(clashes)}")
    return reasons + realcgroups.problems()


def _state(name: str) -> dict[str, object]:
    try:
        return dict(json.loads((layout(name).root / "state.json").read_text()))
    except (OSError, json.JSONDecodeError):
        return {}


def _save_state(name: str, state: dict[str, object]) -> None:
    path = layout(name).root / "state.json"
    path.write_text(json.dumps(state, indent=2) + "\n")


def _node_count(state: dict[str, object]) -> int:
    count = state.get("nodes", 1)  # clusters started before there were two nodes have one
    return count if isinstance(count, int) else 1


def up(
    name: str, timeout: float = 300, progress: Progress = print, build: bool = False, nodes: int = 1
) -> RealCluster:
    """Start the real-node cluster `name` with `nodes` nodes (or reuse it when it is running with that many)
    and wait until it serves pods."""
    if not 1 <= nodes <= realconfig.MAX_NODES:
        raise UserError(
            f"a real-node cluster has 1 to {realconfig.MAX_NODES} nodes, not {nodes}: pass --nodes 1 or 2"
        )
    reasons = preconditions()
    if reasons:
        raise UserError("cannot run a real node here: " + "; ".join(reasons))
    if build and nodebins.missing():
        nodebins.build(progress)
    tools = nodebins.require()
    if exists(name):
        running = _state(name)
        if _node_count(running) == nodes and _healthy(name, running):
            progress(f"reusing the running real-node cluster {name!r}")
            realroutes.install()  # a cluster started before the routes existed gets them too
            return _info(name, running, started=False)
        progress(f"removing the real-node cluster {name!r} left by an earlier run (stale or other size)")
        down(name, progress)
    wanted = images.all_images(progress)
    starters = [realstart.Starter(name, progress, node) for node in realconfig.nodes(name, nodes)]
    starter = starters[0]
    root = starter.layout.root
    for each in starters:
        folders = ("containerd", "kubelet", "local", "pod-logs", "cni/net.d", "cni/ipam")
        for folder in ("logs", "etcd", *folders) if each is starter else folders:
            (each.home.root / folder).mkdir(parents=True, exist_ok=True)
    state: dict[str, object] = {
        "namespace": starter.namespace,
        "images": {i.name: i.ref for i in wanted},
        "nodes": nodes,
    }
    machine.record(root / "sysctls-before.json")
    _save_state(name, state)
    try:
        netns.create(starter.namespace)
        for each in starters[1:]:
            netns.add_node(starter.namespace, each.namespace, each.node.index)
        realroutes.install()
        state["cgroups"] = [c for each in starters for c in realcgroups.make(each.daemon_cgroup)]
        state["cgroup_root"] = starter.pod_cgroup_root
        _save_state(name, state)
        holders = {}
        for each in starters:
            (each.home.root / "resolv.conf").write_text(
                "# no upstream resolver: nothing may leave the namespace\n"
            )
            holders[each.node.name] = each.start_holder()
            state["holder"], state["holders"] = holders[starter.node.name], holders
            _save_state(name, state)
        realstart.start_all(starter, tools, wanted, timeout, tuple(starters[1:]))
        state["pids"] = {k: v for each in starters for k, v in each.pids.items()}
        _save_state(name, state)
    except BaseException:
        if os.environ.get("KVTIER_DEBUG_KEEP"):
            raise
        down(name, progress, keep_logs=True)
        raise
    info = _info(name, state, started=True)
    progress(
        f"real-node cluster {name!r} ready: Kubernetes {info.version} at {info.server}"
        f" (netns {', '.join(n.netns for n in info.nodes)})"
    )
    return info


def _healthy(name: str, state: dict[str, object]) -> bool:
    pids = state.get("pids")
    if not isinstance(pids, dict) or not all(realstart.running(int(pid)) for pid in pids.values()):
        return False
    try:
        return all(realstart.node_ready(name, n.name) for n in realconfig.nodes(name, _node_count(state)))
    except Exception:
        return False


def _info(name: str, state: dict[str, object], started: bool) -> RealCluster:
    def version(api: Rest) -> bool:
        found.append(api.get("/version")["gitVersion"])
        return True

    found: list[str] = []
    realstart.in_namespace(name, version)
    image_refs = state.get("images")
    return RealCluster(
        name=name,
        kubeconfig=layout(name).kubeconfig,
        namespace=netns.name_for(name),
        server=f"https://{netns.NODE_IP}:{realconfig.API_PORT}",
        version=found[0],
        images=dict(image_refs) if isinstance(image_refs, dict) else {},
        started=started,
        nodes=realconfig.nodes(name, _node_count(state)),
    )


def _kill_all(trees: list[Path]) -> set[int]:
    """SIGKILL every process in the cgroup subtrees until none is left (30 s at most); those left.
    Every process of a cluster (or of one node) is in its subtree: the holders, the daemons, the shims, the
    pods' processes. Never a kill by a recorded PID: IDs wrap within minutes here, and a holder that died
    may have left its ID to another session's process."""
    deadline = time.monotonic() + 30
    while (pids := realcgroups.pids(trees)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
    return realcgroups.pids(trees)


def node_cgroup(name: str, index: int) -> str:
    """Node `index`'s cgroup subtree (relative), where its holder, containerd, kubelet, kube-proxy, shims
    and pods run (realstart.Starter nests node n's below node 1's as node-n); node 1's holds them all."""
    root = str(_state(name).get("cgroup_root", ""))
    if not root:
        raise UserError(f"real-node cluster {name!r} is not up (no cgroup_root in its state.json)")
    return root if index == 1 else f"{root}/node-{index}"


def stop_node(name: str, index: int) -> int:
    """Node `index` lost as in a power-off, its link up: every process of its cgroup subtree SIGKILLed
    (its kubelet, containerd, kube-proxy, the pods' processes, its mount namespace with every mount). Its
    network namespace, address and routes stay; its files stay for start_node. How many were killed."""
    if not 2 <= index <= realconfig.MAX_NODES:
        raise UserError(f"only a second node can be stopped (node 1 runs the control plane), not {index}")
    trees = realcgroups.subtrees(node_cgroup(name, index))
    killed = len(realcgroups.pids(trees))
    left = _kill_all(trees)
    if left:
        raise UserError(f"node {index} of {name!r} not stopped: processes {sorted(left)} survived SIGKILL")
    return killed


def start_node(name: str, index: int, timeout: float = 300, progress: Progress = print) -> None:
    """Node `index` started again after stop_node, as a rebooted machine: a new mount namespace (its
    tmpfs /run, /var/lib, /var/log empty again), then containerd, the kubelet and kube-proxy from their
    files; returns once the kubelet has made the node Ready. Each daemon's log before the stop is kept as
    <log>.stopped."""
    node = realconfig.node(name, index)
    starter = realstart.Starter(name, progress, node)
    if starter.pod_cgroup_root != node_cgroup(name, index):
        raise UserError(
            f"start node {index} of {name!r} from a process in the cgroup that started the cluster: "
            f"this one would put it in {starter.pod_cgroup_root}, not {node_cgroup(name, index)}"
        )
    if realcgroups.pids(realcgroups.subtrees(starter.daemon_cgroup)):
        raise UserError(f"node {index} of {name!r} is running: stop it first (stop_node)")
    for component in ("holder", *realstart.CONTAINERD.starts, *realstart.NODE.starts):
        log = starter.log(component)
        if log.exists():
            log.replace(log.with_name(log.name + ".stopped"))
    state = _state(name)
    holders = state.get("holders")
    state["holders"] = {**(holders if isinstance(holders, dict) else {}), node.name: starter.start_holder()}
    _save_state(name, state)
    realstart.restart_node(starter, nodebins.require(), timeout)
    pids = state.get("pids")
    state["pids"] = {**(pids if isinstance(pids, dict) else {}), **starter.pids}
    _save_state(name, state)


def down(name: str, progress: Progress = print, keep_logs: bool = False) -> bool:
    """Stop everything `up` started and put the machine back; False when there was no such cluster."""
    root = layout(name).root
    if not root.exists():
        return False
    state = _state(name)
    recorded = state.get("cgroups")
    created = [str(c) for c in recorded] if isinstance(recorded, list) else []
    cgroup_root = str(state.get("cgroup_root", ""))
    # Only the cluster's own folders: a parent `up` created (this process's cgroup path in a hierarchy
    # that lacked it) may hold other clusters since.
    trees = realcgroups.subtrees(cgroup_root) if cgroup_root else []
    left_pids = _kill_all(trees)
    left_cgroups = realcgroups.remove(trees) if not left_pids else [str(t) for t in trees]
    if not left_cgroups:
        realcgroups.prune(created, trees)
    # Every node's namespace, whatever the state says (a start that failed before saving it).
    for node in realconfig.nodes(name, realconfig.MAX_NODES):
        netns.delete(node.netns)
    restored = machine.restore(root / "sysctls-before.json")
    if pipe_limit.settle():  # a killed session's raise, now that no live holder needs it
        restored.append("fs.pipe-max-size")
    if restored:
        progress(f"restored sysctls changed while it ran: {', '.join(restored)}")
    released = realroutes.release()  # last: should it fail, the folder stays for another `down`
    if released:
        progress(f"removed the unreachable routes for {', '.join(released)} (no real-node cluster is left)")
    if left_pids or left_cgroups:
        raise UserError(
            f"real-node cluster {name!r} not fully removed: processes {sorted(left_pids)} "
            f"cgroups {left_cgroups}; its folder {root} is kept"
        )
    if keep_logs:
        kept = binaries.state_dir() / "real-cluster-logs" / name
        shutil.rmtree(kept, ignore_errors=True)
        if (root / "logs").exists():
            shutil.copytree(root / "logs", kept)
            progress(f"logs of the failed start kept in {kept}")
    shutil.rmtree(root)
    return True


def status(name: str) -> dict[str, object]:
    info: dict[str, object] = {"name": name, "runtime": "real", "exists": exists(name), "ready": False}
    if not info["exists"]:
        return info
    state = _state(name)
    info.update(
        kubeconfig=str(layout(name).kubeconfig), netns=netns.name_for(name), logs=str(layout(name).logs)
    )
    info["ready"] = _healthy(name, state)
    info["nodes"] = [_node_status(name, n) for n in realconfig.nodes(name, _node_count(state))]
    return info


def _node_status(name: str, node: realconfig.Node) -> dict[str, object]:
    try:
        ready = realstart.node_ready(name, node.name)
    except Exception:
        ready = False
    return {"name": node.name, "ip": node.ip, "pod_cidr": node.pod_cidr, "netns": node.netns, "ready": ready}


def node_mounts(name: str) -> str:
    """The node's mount table (/proc/<pid>/mountinfo of the process that holds its private mount namespace,
    where the kubelet, containerd and the pods' mounts live); empty when the cluster is not up."""
    holder = _state(name).get("holder") if exists(name) else None
    try:
        return Path(f"/proc/{holder}/mountinfo").read_text() if isinstance(holder, int) else ""
    except OSError:
        return ""
