"""The real node's programs, as `toolchain/install.sh node` leaves them in the cache.

kubelet, kube-proxy and CoreDNS are built from the Go module proxy (bin/<tool>-<version>, like the
control plane); containerd, runc, the CNI plugins, iptables and mmdebstrap are Debian packages unpacked
into node/debian/ (toolchain/debs.sh); the pods' sandbox program is this repository's own
(toolchain/node/pause), cached by the hash of its source.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from kvtier import paths
from kvtier.cluster.common import binaries
from kvtier.errors import UserError
from kvtier.toolchain import versions

BUILD_HINT = "run `make node-tools` (toolchain/install.sh node) to build them once"
PAUSE_SOURCE = paths.ROOT / "toolchain" / "node" / "pause"
GO_TOOLS = {"kubelet": "KUBERNETES_VERSION", "kube-proxy": "KUBERNETES_VERSION", "coredns": "COREDNS_VERSION"}
# Paths inside the unpacked Debian tree.
DEBIAN_TOOLS = {
    "containerd": "usr/bin/containerd",
    "containerd-shim-runc-v2": "usr/bin/containerd-shim-runc-v2",
    "ctr": "usr/bin/ctr",
    "runc": "usr/sbin/runc",
    "iptables": "usr/sbin/iptables",
    "mmdebstrap": "usr/bin/mmdebstrap",
    "cni-bridge": "usr/lib/cni/bridge",
    "cni-host-local": "usr/lib/cni/host-local",
    "cni-loopback": "usr/lib/cni/loopback",
}
# What the node needs from the machine itself.
HOST_COMMANDS = ["ip", "nsenter", "unshare", "openssl", "perl", "apt-get", "mount"]


def debian_root() -> Path:
    return binaries.cache_dir() / "node" / "debian"


def pause_path() -> Path:
    source = (PAUSE_SOURCE / "go.mod").read_bytes() + (PAUSE_SOURCE / "main.go").read_bytes()
    return binaries.cache_dir() / "bin" / f"pause-{hashlib.sha256(source).hexdigest()[:8]}"


def path(tool: str) -> Path:
    if tool in GO_TOOLS:
        return binaries.cache_dir() / "bin" / f"{tool}-{versions()[GO_TOOLS[tool]]}"
    if tool == "pause":
        return pause_path()
    return debian_root() / DEBIAN_TOOLS[tool]


def missing() -> list[str]:
    """Node programs not built or unpacked yet (the control plane's are checked by `binaries`)."""
    tools = [*GO_TOOLS, "pause", *DEBIAN_TOOLS]
    return [tool for tool in tools if not os.access(path(tool), os.X_OK)] + binaries.missing()


def absent_host_commands() -> list[str]:
    return [command for command in HOST_COMMANDS if shutil.which(command) is None]


def require() -> dict[str, Path]:
    absent = missing()
    if absent:
        raise UserError(f"real-node programs not built: {', '.join(absent)}; {BUILD_HINT}")
    return {tool: path(tool) for tool in [*GO_TOOLS, "pause", *DEBIAN_TOOLS]} | binaries.require()


def environment() -> dict[str, str]:
    """PATH and library settings under which the unpacked Debian programs find each other."""
    root = debian_root()
    lib = root / "usr" / "lib" / "x86_64-linux-gnu"
    search = [root / "usr" / "sbin", root / "usr" / "bin", binaries.cache_dir() / "bin"]
    return {
        "PATH": os.pathsep.join([*map(str, search), os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")]),
        "LD_LIBRARY_PATH": str(lib),
        "XTABLES_LIBDIR": str(lib / "xtables"),
    }


def build(progress: Callable[[str], None]) -> None:
    """Build or unpack what is missing with toolchain/install.sh node (minutes on first use only)."""
    script = paths.ROOT / "toolchain" / "install.sh"
    progress(f"building {', '.join(missing())} once with {script.name} node")
    env = {**os.environ, "PYTHON": sys.executable, "KVTIER_CACHE": str(binaries.cache_dir())}
    proc = subprocess.run(
        ["bash", str(script), "node"], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True
    )
    if proc.returncode != 0 or missing():
        raise UserError(
            f"building the real-node programs failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
        )
