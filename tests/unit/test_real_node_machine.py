"""What the real-node tier demands of the machine and leaves on it, checked without root or a cluster:
the cgroup layouts it accepts, the unreachable routes for its private ranges, and that under CI a machine
that cannot run the tier fails the tier instead of skipping it."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kvtier import paths
from kvtier.cluster.common import binaries
from kvtier.cluster.realnode import cgroups as realcgroups
from kvtier.cluster.realnode import machine, netns
from kvtier.cluster.realnode import routes as realroutes
from kvtier.errors import UserError


def _hierarchies(root: Path, names: list[str]) -> None:
    for name in names:
        (root / name).mkdir(parents=True)
        (root / name / "cgroup.procs").write_text("")


def test_cgroup_layouts_are_judged_and_each_lack_is_named(tmp_path: Path) -> None:
    own = tmp_path / "self-cgroup"
    own.write_text("4:memory:/process_api/abc\n1:cpu:/\n0::/\n")
    hybrid = tmp_path / "hybrid"
    _hierarchies(hybrid, ["cpu", "cpuacct", "cpuset", "memory", "pids", "systemd"])
    (hybrid / "unified").mkdir()
    (hybrid / "unified" / "cgroup.controllers").write_text("hugetlb\n")  # v2 beside v1, as here
    assert realcgroups.problems(hybrid, own) == []
    assert realcgroups.own_cgroup(own) == "/process_api/abc"

    unified = tmp_path / "unified-only"
    unified.mkdir()
    (unified / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (problem,) = realcgroups.problems(unified, own)
    assert "unified cgroup v2 hierarchy only" in problem and "cpu, cpuacct, cpuset, memory" in problem

    partial = tmp_path / "partial"
    _hierarchies(partial, ["cpu", "cpuacct", "pids"])
    assert realcgroups.problems(partial, own) == [
        f"no cgroup v1 hierarchy mounted at {partial}/<controller> for cpuset, memory"
    ]

    own.write_text("1:cpu:/\n0::/\n")
    assert realcgroups.problems(hybrid, own) == [f"{own} names no memory cgroup for this process"]


class FakeIp:
    """The machine's main routing table as `ip` would keep it, for realroutes' calls."""

    def __init__(self, routes: list[dict[str, object]]) -> None:
        self.routes = routes
        self.changes: list[tuple[str, ...]] = []

    def __call__(self, *args: str) -> str:
        if args[:4] == ("-json", "-4", "route", "show"):
            return json.dumps(self.routes)
        verb, kind, cidr, _, protocol = args[1:6]
        self.changes.append((verb, cidr))
        mine = {"type": kind, "dst": cidr, "protocol": protocol, "flags": []}
        if verb == "add":
            assert all(r.get("dst") != cidr for r in self.routes), "ip: File exists"
            self.routes.append(mine)
        else:
            self.routes.remove(mine)
        return ""


MACHINE = [
    {"dst": "default", "gateway": "192.0.2.1", "dev": "eth0", "flags": []},
    {"dst": "192.0.2.0/24", "dev": "eth0", "protocol": "kernel", "scope": "link", "flags": []},
    {"dst": "10.0.0.0/8", "gateway": "192.0.2.9", "dev": "eth0", "flags": []},  # wider: ours wins
]


@pytest.fixture
def fake_ip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeIp:
    fake = FakeIp([dict(r) for r in MACHINE])
    monkeypatch.setattr(realroutes, "_ip", fake)
    monkeypatch.setattr(netns, "NETNS_DIR", tmp_path / "netns")
    (tmp_path / "netns").mkdir()
    return fake


def test_the_ranges_are_the_cluster_ones_and_do_not_overlap() -> None:
    networks = [ipaddress.ip_network(c) for c in netns.PRIVATE_RANGES.values()]
    assert ipaddress.ip_address(netns.NODE_IP) in networks[0]
    assert ipaddress.ip_address(netns.API_SERVICE_IP) in networks[1]
    assert ipaddress.ip_address(netns.DNS_SERVICE_IP) in networks[1]
    assert all(not a.overlaps(b) for i, a in enumerate(networks) for b in networks[i + 1 :])


def test_routes_stay_while_any_cluster_namespace_is_left(fake_ip: FakeIp) -> None:
    ranges = list(netns.PRIVATE_RANGES.values())
    (netns.NETNS_DIR / "kvtier-a").touch()
    assert realroutes.install() == ranges
    assert realroutes.present() == ranges
    (netns.NETNS_DIR / "kvtier-b").touch()
    assert realroutes.install() == []  # shared: a second cluster adds nothing
    (netns.NETNS_DIR / "kvtier-a").unlink()
    (netns.NETNS_DIR / "other-tool").touch()  # not a cluster's namespace
    assert realroutes.release() == []  # cluster b is still up
    (netns.NETNS_DIR / "kvtier-b").unlink()
    assert realroutes.release() == ranges
    assert fake_ip.routes == MACHINE  # the machine's own routes untouched
    assert fake_ip.changes == [("add", c) for c in ranges] + [("del", c) for c in ranges]


def test_a_machine_that_routes_into_a_range_is_refused_by_name(fake_ip: FakeIp) -> None:
    fake_ip.routes.append({"dst": "10.96.5.0/24", "dev": "eth1", "protocol": "kernel", "flags": []})
    with pytest.raises(UserError) as refused:
        realroutes.install()
    message = str(refused.value)
    route = "10.96.5.0/24 (`10.96.5.0/24 dev eth1 proto kernel`)"
    assert f"{route} lies in the cluster's Service range 10.96.0.0/16" in message
    assert fake_ip.changes == []  # nothing added before refusing


def test_a_machine_without_the_tier_fails_it_under_ci_and_skips_it_elsewhere(tmp_path: Path) -> None:
    """Runs one node test on a machine made to lack the node's commands (an empty PATH): under CI the
    tier must fail and name what is missing, elsewhere skip with the same reason."""
    test = "tests/node/test_real_node.py::test_node_is_ready_with_the_pinned_kubelet_and_containerd"
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {
        "PATH": str(tmp_path),
        "PYTHONDONTWRITEBYTECODE": "1",
    }

    def run(extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-q", test]
        return subprocess.run(
            argv, cwd=paths.ROOT, env=env | extra, capture_output=True, text=True, timeout=120
        )

    reason = "this machine cannot run the real-node tier: "
    lacks = "commands not found on PATH: ip, nsenter"
    in_ci = run({"CI": "true"})
    assert in_ci.returncode == 1, in_ci.stdout[-2000:]
    assert f"prerequisite missing in CI: {reason}" in in_ci.stdout and lacks in in_ci.stdout
    assert "1 error" in in_ci.stdout
    local = run({})
    assert local.returncode == 0, local.stdout[-2000:]
    assert "1 skipped" in local.stdout and reason in local.stdout and lacks in local.stdout


def test_the_machine_mounts_leave_out_the_temp_folder_and_keep_the_rest(tmp_path: Path, need) -> None:
    """The node test's before/after comparison runs beside the engine tests, which mount tmpfs under the
    temp folder: the kernel's own mount table (mountinfo) must show a mount there and the snapshot must
    leave it out, while a mount anywhere else (here the test runs' state folder) is kept."""
    need(os.geteuid() == 0, "mounts a tmpfs (root only)")
    elsewhere = Path(tempfile.mkdtemp(dir=os.environ[binaries.STATE_ENV]))
    mounted = []
    try:
        for where in (tmp_path, elsewhere):
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)], check=True)
            mounted.append(where)
        table = Path("/proc/self/mountinfo").read_text()
        assert f" {tmp_path} " in table and f" {elsewhere} " in table
        kept = machine.host_mounts()
        assert f"{elsewhere} tmpfs tmpfs" in kept
        assert not any(line.startswith(f"{tmp_path} ") for line in kept), kept
    finally:
        for where in mounted:
            subprocess.run(["umount", str(where)], check=False)
        elsewhere.rmdir()
