"""The pinned control-plane binaries, as built by `toolchain/install.sh cluster`.

They live in the version-keyed cache ($KVTIER_CACHE, default ~/.cache/kvtier) as bin/<tool>-<version>;
reading them from there (rather than .tools/bin links) guarantees the versions in versions.env.
"""

from __future__ import annotations

import os
from pathlib import Path

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


def cache_dir() -> Path:
    """The toolchain cache shared by every checkout on this machine."""
    return Path(os.environ.get("KVTIER_CACHE") or Path.home() / ".cache" / "kvtier")


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
    """Minor version of the pinned Kubernetes (v1.37.2 -> 37)."""
    return int(versions()["KUBERNETES_VERSION"].lstrip("v").split(".")[1])
