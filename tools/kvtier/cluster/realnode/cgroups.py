"""Where a real-node cluster's processes live: one subtree below this process's own cgroup, in each
cgroup v1 hierarchy the machine mounts, and what the machine must offer for that.

The kubelet, containerd and runc run with the cgroupfs driver on the v1 hierarchies; a machine that
mounts only the unified (v2) hierarchy is not supported yet (docs/cluster.md, "cgroup v2"). `down` finds
every process of the cluster in its subtree, kills them and removes the folders, runc's in the unified
hierarchy included.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
# The v1 hierarchies the daemons and pods are placed in, those mounted here (the kubelet wants all, the
# named systemd one too).
CONTROLLERS = ["cpu", "cpuacct", "cpuset", "memory", "pids", "blkio", "devices", "freezer", "systemd"]
# The kubelet refuses to start without these v1 hierarchies (its validateSystemRequirements); the
# cluster nests below this process's memory cgroup.
REQUIRED = ["cpu", "cpuacct", "cpuset", "memory"]


def problems(root: Path = CGROUP_ROOT, own: Path = Path("/proc/self/cgroup")) -> list[str]:
    """What the machine's cgroups lack for a real node (empty when nothing)."""
    if (root / "cgroup.controllers").exists():
        return [
            f"{root} is the unified cgroup v2 hierarchy only; the real node needs cgroup v1 hierarchies"
            f" for {', '.join(REQUIRED)} (a legacy or hybrid layout; docs/cluster.md, 'cgroup v2')"
        ]
    absent = [c for c in REQUIRED if not (root / c / "cgroup.procs").exists()]
    if absent:
        return [f"no cgroup v1 hierarchy mounted at {root}/<controller> for {', '.join(absent)}"]
    if own_cgroup(own) is None:
        return [f"{own} names no memory cgroup for this process"]
    return []


def own_cgroup(own: Path = Path("/proc/self/cgroup")) -> str | None:
    """This process's memory cgroup ("" at the root): the cluster nests below it, inside whatever limits
    apply to us."""
    with contextlib.suppress(OSError):
        for line in own.read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if "memory" in controllers.split(","):
                return path.rstrip("/")
    return None


def controllers() -> list[str]:
    return [c for c in CONTROLLERS if (CGROUP_ROOT / c / "cgroup.procs").exists()]


def procs_files(relative: str) -> list[Path]:
    """The cgroup.procs file of `relative` in every hierarchy the cluster uses."""
    return [CGROUP_ROOT / c / relative.strip("/") / "cgroup.procs" for c in controllers()]


def make(relative: str) -> list[str]:
    """Create `relative` in every controller; the folders created, outermost first."""
    created = []
    for controller in controllers():
        path = CGROUP_ROOT / controller
        for part in relative.strip("/").split("/"):
            parent, path = path, path / part
            if not path.exists():
                path.mkdir()
                created.append(str(path))
                if controller == "cpuset":  # a new cpuset has no CPUs until given its parent's
                    for knob in ("cpuset.cpus", "cpuset.mems"):
                        (path / knob).write_text((parent / knob).read_text())
    return created


def subtrees(relative: str) -> list[Path]:
    """The cluster's cgroup folder in every hierarchy (runc also writes to the unified one)."""
    trees = [h / relative.strip("/") for h in sorted(CGROUP_ROOT.iterdir()) if h.is_dir()]
    return [t for t in trees if t.is_dir()]


def prune(created: list[str], trees: list[Path]) -> None:
    """rmdir the parents `up` created above the cluster's folders, innermost first, each only when empty:
    another cluster started meanwhile may live below one of them (its processes are never ours to kill)."""
    for folder in map(Path, reversed(created)):
        if not any(folder.is_relative_to(tree) for tree in trees):
            with contextlib.suppress(OSError):
                folder.rmdir()


def _folders(tree: Path) -> list[Path]:
    """Every folder of a cgroup tree, `tree` included. os.walk skips a folder that vanishes while it
    reads (the kubelet and runc remove pod cgroups as the cluster stops); Path.rglob raises there."""
    return [Path(folder) for folder, _, _ in os.walk(tree)]


def pids(trees: list[Path]) -> set[int]:
    found: set[int] = set()
    for tree in trees:
        for folder in _folders(tree):
            try:
                found |= {int(pid) for pid in (folder / "cgroup.procs").read_text().split()}
            except OSError:
                continue
    return found


def remove(trees: list[Path]) -> list[str]:
    """rmdir each tree, deepest folders first; the folders that are left."""
    for tree in trees:
        if tree.exists():
            for folder in sorted(_folders(tree)[1:], key=lambda p: -len(p.parts)):
                with contextlib.suppress(OSError):
                    folder.rmdir()
            with contextlib.suppress(OSError):
                tree.rmdir()
    return [str(tree) for tree in trees if tree.exists()]


def joiner(procs: list[Path]) -> Callable[[], None]:
    """A preexec_fn: the child starts its own session and joins the given cgroups before exec."""

    def join() -> None:  # runs in the child between fork and exec
        os.setsid()
        for path in procs:
            path.write_text(f"{os.getpid()}\n")

    return join
