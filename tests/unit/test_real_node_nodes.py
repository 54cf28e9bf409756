"""The real-node cluster's nodes as data: addresses, ranges, namespaces, per-node files and command lines,
CoreDNS's entries for every node (the nodes themselves run in tests/node/test_two_nodes.py)."""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kvtier.cluster.realnode import cgroups as realcgroups
from kvtier.cluster.realnode import config as realconfig
from kvtier.cluster.realnode import lifecycle as realnode
from kvtier.cluster.realnode import netns
from kvtier.cluster.realnode import start as realstart
from kvtier.errors import UserError


def test_each_node_has_its_own_address_range_and_namespace_inside_the_refused_ranges() -> None:
    first, second = realconfig.nodes("c", 2)
    assert (first.name, first.ip, first.pod_cidr, first.netns) == (
        realconfig.NODE_NAME,
        netns.NODE_IP,
        netns.POD_CIDR,
        netns.name_for("c"),
    )
    assert second.name != first.name and second.ip != first.ip and second.netns != first.netns
    assert second.netns.startswith(netns.PREFIX)  # found by cleanup with every cluster's namespace
    pods = [ipaddress.ip_network(n.pod_cidr) for n in (first, second)]
    assert not pods[0].overlaps(pods[1])
    refused = {kind: ipaddress.ip_network(cidr) for kind, cidr in netns.PRIVATE_RANGES.items()}
    assert all(ipaddress.ip_address(n.ip) in refused["node"] for n in (first, second))
    assert all(p.subnet_of(refused["pod"]) for p in pods)


def test_node_2_runs_from_its_own_files_with_the_shared_kubelet_root(tmp_path: Path) -> None:
    lay = realconfig.Layout(tmp_path / "c")
    second = realconfig.node("c", 2)
    home = second.home(lay)
    assert home.root != lay.root and home.containerd_socket != lay.containerd_socket
    tools = {t: Path(f"/x/{t}") for t in ("etcd", "containerd", "kubelet", "kube-proxy")}
    tools |= {t: Path(f"/x/{t}") for t in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")}
    argv = realstart.command_lines(lay, tools, second)
    kubelet = argv["kubelet"]
    flags = dict(zip(kubelet[1::2], kubelet[2::2], strict=False))
    assert flags["--root-dir"] == realconfig.KUBELET_DIR
    assert (flags["--node-ip"], flags["--hostname-override"]) == (second.ip, second.name)
    assert flags["--config"] == str(home.root / "kubelet.yaml")
    assert flags["--kubeconfig"] == str(lay.kubeconfig)  # the one API server
    assert argv["containerd"][-1] == str(home.root / "containerd.toml")
    node_1 = realstart.command_lines(lay, tools)["kubelet"]
    assert node_1[node_1.index("--root-dir") + 1] == realconfig.KUBELET_DIR  # the same path on each


def test_node_configs_carry_the_nodes_own_address_range_and_name(tmp_path: Path) -> None:
    second = realconfig.node("c", 2)
    home = second.home(realconfig.Layout(tmp_path))
    kubelet = yaml.safe_load(realconfig.kubelet(home, "/a/node-2", second.ip))
    assert kubelet["address"] == second.ip
    assert kubelet["containerRuntimeEndpoint"] == f"unix://{home.containerd_socket}"
    proxy = yaml.safe_load(realconfig.kube_proxy(realconfig.Layout(tmp_path), second.name))
    assert proxy["hostnameOverride"] == second.name
    assert proxy["clusterCIDR"] == netns.PRIVATE_RANGES["pod"]  # every node's pods are the cluster's
    assert second.pod_cidr in realconfig.cni(home, second.pod_cidr)


def test_coredns_resolves_every_nodes_name() -> None:
    nodes = realconfig.nodes("c", 2)
    objects = list(yaml.safe_load_all(realconfig.coredns_manifests("img", nodes)))
    corefile = next(o for o in objects if o["kind"] == "ConfigMap")["data"]["Corefile"]
    hosts = corefile.split("hosts {")[1].split("}")[0].split("\n")
    entries = [line.split() for line in hosts if line.strip() and line.strip() != "fallthrough"]
    assert entries == [[n.ip, n.name] for n in nodes]


@pytest.mark.parametrize("count", [0, 3])
def test_up_refuses_a_node_count_it_cannot_join(count: int) -> None:
    with pytest.raises(UserError, match=r"1 to 2 nodes, not .*: pass --nodes 1 or 2"):
        realnode.up("c", nodes=count, progress=lambda m: None)


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--nodes", "2"], "only a --runtime real cluster starts more than one node"),
        (["--runtime", "real", "--nodes", "3"], "1 to 2 nodes, not 3"),
    ],
)
def test_cluster_up_nodes_flag_is_checked_before_anything_starts(flags: list[str], said: str) -> None:
    argv = [sys.executable, "-m", "kvtier.cli", "cluster", "up", "--name", "never-started-here", *flags]
    result = subprocess.run([*argv, "--no-build"], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and said in result.stderr and "Traceback" not in result.stderr


def test_down_touches_only_its_own_cgroups_not_a_parent_it_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`up` may create this process's cgroup path in a hierarchy that lacked it; another cluster started
    later lives below that parent too, so `down` kills and removes only below its own folder, and removes
    the parent only once it is empty."""
    monkeypatch.setattr(realcgroups, "CGROUP_ROOT", tmp_path)
    parent = tmp_path / "cpu" / "sandbox"
    (parent / "kvtier-a" / "daemons").mkdir(parents=True)
    (parent / "kvtier-b" / "daemons").mkdir(parents=True)  # the other cluster
    created = [str(parent), str(parent / "kvtier-a"), str(parent / "kvtier-a" / "daemons")]
    trees = realcgroups.subtrees("/sandbox/kvtier-a")
    assert trees == [parent / "kvtier-a"]
    assert realcgroups.remove(trees) == []
    realcgroups.prune(created, trees)
    assert (parent / "kvtier-b" / "daemons").is_dir()  # the other cluster's folders stay
    (parent / "kvtier-b" / "daemons").rmdir()
    (parent / "kvtier-b").rmdir()
    realcgroups.prune(created, trees)
    assert not parent.exists()  # once empty, the parent `up` created goes


def _cluster_cgroups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, procs: dict[str, str]) -> str:
    """A fake cluster `c` (its state.json, cgroup folders below tmp_path with the given cgroup.procs
    contents, relative to its root); the root's relative path."""
    monkeypatch.setattr(realcgroups, "CGROUP_ROOT", tmp_path / "cg")
    monkeypatch.setattr(realconfig, "clusters_dir", lambda: tmp_path / "clusters")
    root = f"{realcgroups.own_cgroup() or ''}/kvtier-c"
    for folder, pids in procs.items():
        path = tmp_path / "cg" / "memory" / root.strip("/") / folder
        path.mkdir(parents=True)
        (path / "cgroup.procs").write_text(pids)
    (tmp_path / "clusters" / "c").mkdir(parents=True)
    (tmp_path / "clusters" / "c" / "state.json").write_text(json.dumps({"cgroup_root": root}))
    return root


def test_stopping_node_2_kills_only_its_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Node 2 stopped as in a power-off: every process of its cgroup subtree (daemons and pods) gets
    SIGKILL, node 1's (the control plane) none."""
    _cluster_cgroups(
        tmp_path,
        monkeypatch,
        {"daemons": "11\n", "node-2/daemons": "21\n22\n", "node-2/kubepods/pod-a": "23\n"},
    )
    killed: list[int] = []

    def kill(pid: int, sig: int) -> None:  # a killed process leaves its cgroup
        assert sig == signal.SIGKILL
        killed.append(pid)
        for procs in (tmp_path / "cg").rglob("cgroup.procs"):
            procs.write_text("".join(f"{p}\n" for p in procs.read_text().split() if int(p) != pid))

    monkeypatch.setattr(os, "kill", kill)
    assert realnode.stop_node("c", 2) == 3
    assert sorted(killed) == [21, 22, 23]


def test_node_1_is_never_stopped_and_a_running_node_never_started_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _cluster_cgroups(tmp_path, monkeypatch, {"daemons": "11\n", "node-2/daemons": "21\n"})
    with pytest.raises(UserError, match="only a second node can be stopped"):
        realnode.stop_node("c", 1)
    with pytest.raises(UserError, match="node 2 of 'c' is running: stop it first"):
        realnode.start_node("c", 2, progress=lambda m: None)
