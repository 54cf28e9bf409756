"""The pinned toolchain: versions from toolchain/versions.env, binaries in .tools/bin.

`KVTIER_HELM` points the toolkit at a Helm of the user's own; tests always use the pinned ones.
"""

from __future__ import annotations

import os
import shutil
from functools import cache
from pathlib import Path

from kvtier import paths
from kvtier.errors import UserError

VERSIONS_FILE = paths.ROOT / "toolchain" / "versions.env"
INSTALL_HINT = "run `make tools` (toolchain/install.sh) to build the pinned toolchain"


@cache
def versions() -> dict[str, str]:
    """KEY=VALUE pairs of the versions file (comments and blank lines skipped)."""
    pairs: dict[str, str] = {}
    for line in VERSIONS_FILE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            pairs[key.strip()] = value.strip()
    return pairs


def pinned(name: str) -> Path:
    """Path of a pinned tool in .tools/bin, or a UserError saying how to install it."""
    path = paths.TOOLS_BIN / name
    if not path.exists():
        raise UserError(f"{name} is not installed at {path}; {INSTALL_HINT}")
    return path


def helm(major: int = 3, *, allow_override: bool = True) -> Path:
    """The Helm binary of a major version: $KVTIER_HELM when set (and allowed), else the pinned one."""
    override = os.environ.get("KVTIER_HELM") if allow_override else None
    if override:
        found = shutil.which(override)
        if not found:
            raise UserError(f"KVTIER_HELM={override} is not an executable; unset it to use the pinned Helm")
        return Path(found)
    return pinned(f"helm{major}")
