"""What a real-node cluster may change on the machine, recorded before `up` and checked after `down`.

Inside its network namespace the cluster changes what it likes (iptables chains, net.* sysctls, links):
that state goes with the namespace. Outside it, the kubelet writes a few global kernel settings at start
(`KUBELET_SYSCTLS`), and the Curvine tier raises one (`CLUSTER_SYSCTLS`); `record` saves them and `restore`
writes back any that changed. `snapshot` is the
wider picture a test compares before and after: the machine's global sysctls, its own iptables rules,
mounts, network namespaces, links and routes, and cgroups.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

from kvtier.cluster.realnode import nodebins

PROC_SYS = Path("/proc/sys")
# Written by the kubelet's setupKernelTunables (pkg/kubelet/cm/container_manager_linux.go).
KUBELET_SYSCTLS = [
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
]
# fs.pipe-max-size is not among them: other clusters' FUSE clients may still need it raised when this one
# goes down (realnode.pipe_limit puts it back after the last).
CLUSTER_SYSCTLS = KUBELET_SYSCTLS
# Change on their own, whatever runs.
VOLATILE_SYSCTLS = re.compile(r"^kernel/(ns_last_pid|random/.*|pty/nr)$")
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _read(key: str) -> str | None:
    try:
        return (PROC_SYS / key).read_text().strip()
    except OSError:
        return None


def record(path: Path) -> None:
    values = {key: _read(key) for key in CLUSTER_SYSCTLS}
    path.write_text(json.dumps(values, indent=2) + "\n")


def restore(path: Path) -> list[str]:
    """Write back the recorded values that differ now; the keys restored."""
    try:
        values = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return []
    restored = []
    for key, value in values.items():
        if value is not None and _read(key) != value:
            (PROC_SYS / key).write_text(value + "\n")
            restored.append(key.replace("/", "."))
    return restored


def global_sysctls() -> dict[str, str]:
    values = {}
    for folder in ("vm", "kernel"):
        for entry in sorted((PROC_SYS / folder).rglob("*")):
            key = str(entry.relative_to(PROC_SYS))
            if entry.is_file() and not VOLATILE_SYSCTLS.match(key):
                value = _read(key)
                if value is not None:
                    values[key] = value
    return values


def _output(argv: list[str]) -> str:
    env = nodebins.environment()
    proc = subprocess.run(argv, capture_output=True, text=True, env={"PATH": env["PATH"], **env})
    return proc.stdout if proc.returncode == 0 else f"(failed: {proc.stderr.strip()})"


def _iptables_rules() -> str:
    """The machine's own iptables rules (its namespace), without iptables-save's time-stamped comments."""
    text = _output([str(nodebins.path("iptables").with_name("iptables-save"))])
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))


def host_mounts() -> list[str]:
    # Mount point, file system type and source: the IDs and options of an unchanged mount may differ.
    # Not those under the temp folder: the engine tests beside a node test (toolchain/tests.sh) and other
    # work mount tmpfs there all the time, and a cluster mounts nothing there (its mounts live in its
    # private mount namespace; the machine's gets only its network namespace's file under /run/netns).
    temp = Path(tempfile.gettempdir()).resolve()
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        separator = fields.index("-")
        if not Path(fields[4]).is_relative_to(temp):
            mounts.append(f"{fields[4]} {fields[separator + 1]} {fields[separator + 2]}")
    return sorted(mounts)


def _cgroups() -> list[str]:
    # Only the cluster's own kind: other sessions on the machine create and remove cgroups all the time.
    # os.walk skips a folder that vanishes while it walks (a running cluster's pods come and go).
    found = []
    for top, folders, _ in os.walk(CGROUP_ROOT):
        found += [os.path.join(top, f) for f in folders if re.search(r"kvtier|kubepods", f)]
    return sorted(str(Path(path).relative_to(CGROUP_ROOT)) for path in found)


def snapshot() -> dict[str, object]:
    return {
        "sysctls": global_sysctls(),
        "iptables": _iptables_rules(),
        "mounts": host_mounts(),
        "netns": sorted(p.name for p in Path("/run/netns").glob("*")) if Path("/run/netns").is_dir() else [],
        "links": sorted(re.findall(r"^\d+: ([^:@]+)", _output(["ip", "-o", "link"]), re.M)),
        # Every table: the unreachable routes a real-node cluster adds (realnode.routes) included.
        "routes": sorted(_output(["ip", "-4", "route", "show", "table", "all"]).splitlines()),
        "cgroups": _cgroups(),
    }
