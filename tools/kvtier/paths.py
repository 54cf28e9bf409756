"""Where the bundle's parts live, relative to the repository root."""

from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    """The bundle checkout: $KVTIER_ROOT, else the nearest parent holding charts/ and toolchain/."""
    env = os.environ.get("KVTIER_ROOT")
    if env:
        return Path(env).resolve()
    for candidate in [Path.cwd(), *Path.cwd().parents, *Path(__file__).resolve().parents]:
        if (candidate / "charts").is_dir() and (candidate / "toolchain" / "versions.env").is_file():
            return candidate
    return Path.cwd()


ROOT = repo_root()
CHARTS = ROOT / "charts"
VALUES = ROOT / "values"
SCHEMA = ROOT / "schema"
TOOLS_BIN = ROOT / ".tools" / "bin"
