"""Files of an upstream Go module at a pinned version, from the Go module proxy (`go mod download`).

Some upstream facts are plain files inside a module: KEDA's and the Prometheus Operator's CRDs,
kube-state-metrics' metric names. The module cache keeps them after the first download.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from kvtier import toolchain
from kvtier.errors import UserError


def module_dir(module: str, version_key: str) -> Path:
    """The source folder of `module` at the version toolchain/versions.env pins under `version_key`."""
    version = toolchain.versions()[version_key]
    go = shutil.which("go")
    if go is None:
        raise UserError(f"Go is needed to fetch {module}@{version} from the Go module proxy; none on PATH")
    done = subprocess.run(
        [go, "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    info = json.loads(done.stdout or "{}") if done.stdout.strip().startswith("{") else {}
    if done.returncode != 0 or "Dir" not in info:
        reason = info.get("Error") or done.stderr.strip() or f"exit {done.returncode}"
        raise UserError(f"go mod download {module}@{version} failed: {reason}")
    return Path(info["Dir"])
