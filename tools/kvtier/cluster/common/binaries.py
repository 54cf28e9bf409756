"""The pinned control-plane binaries, as built by `toolchain/install.sh cluster`.

They live in the version-keyed cache ($KVTIER_CACHE, default ~/.cache/kvtier) as bin/<tool>-<version>;
reading them from there (rather than .tools/bin links) guarantees the versions in versions.env.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from kvtier import paths
from kvtier.errors import UserError
from kvtier.toolchain import versions

# tool -> the versions.env key that pins it
TOOLS = {
    "kube-apiserver": "KUBERNETES_VERSION",
    "kube-controller-manager": "KUBERNETES_VERSION",
    "kube-scheduler": "KUBERNETES_VERSION",
    "kubectl": "KUBERNETES_VERSION",
    "etcd": "ETCD_VERSION",
    "kwok": "KWOK_VERSION",
    "kwokctl": "KWOK_VERSION",
}
BUILD_HINT = "run `make cluster-tools` (toolchain/install.sh cluster) to build them once"


STATE_ENV = "KVTIER_STATE_DIR"  # where running clusters keep their folders; a test run names its own


def cache_dir() -> Path:
    """The toolchain cache shared by every checkout on this machine."""
    return Path(os.environ.get("KVTIER_CACHE") or Path.home() / ".cache" / "kvtier")


def state_dir() -> Path:
    """The folders of running clusters (local control planes, real nodes) and of who uses them:
    $KVTIER_STATE_DIR, else the cache. Kept apart from the built binaries so that a test run, pointed at
    a folder of its own, can neither see nor stop the clusters a user's `kvtier validate` or `kvtier
    cluster up` keeps up."""
    return Path(os.environ.get(STATE_ENV) or cache_dir())


def path(tool: str) -> Path:
    """Cache path of one pinned tool (it may not exist yet)."""
    return cache_dir() / "bin" / f"{tool}-{versions()[TOOLS[tool]]}"


def missing() -> list[str]:
    """Tools not built yet, as `name-version`."""
    return [path(tool).name for tool in TOOLS if not os.access(path(tool), os.X_OK)]


def require() -> dict[str, Path]:
    """Every tool's path, or a UserError naming the missing ones and how to build them."""
    absent = missing()
    if absent:
        raise UserError(
            f"control-plane binaries not built: {', '.join(absent)} in {cache_dir() / 'bin'}; {BUILD_HINT}"
        )
    return {tool: path(tool) for tool in TOOLS}


def kubernetes_minor() -> int:
    """Minor version of the pinned Kubernetes (v1.MINOR.PATCH -> MINOR)."""
    return int(versions()["KUBERNETES_VERSION"].lstrip("v").split(".")[1])


def build(progress: Callable[[str], None]) -> None:
    """Build the missing tools with toolchain/install.sh (Go module proxy; minutes on first use only)."""
    script = paths.ROOT / "toolchain" / "install.sh"
    progress(f"building {', '.join(missing())} once with {script.name} (cached in {cache_dir() / 'bin'})")
    env = {**os.environ, "PYTHON": sys.executable, "KVTIER_CACHE": str(cache_dir())}
    proc = subprocess.Popen(
        ["bash", str(script), "cluster"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    tail: list[str] = []
    for line in proc.stdout:
        progress(f"  {line.rstrip()}")
        tail = [*tail[-30:], line]
    if proc.wait() != 0 or missing():
        raise UserError(
            f"building the control-plane binaries failed (exit {proc.returncode}):\n{''.join(tail)}"
        )
