"""Values of the release already deployed in a cluster (`--kube-context`), for upgrade-only rules."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from kvtier import toolchain
from kvtier.errors import UserError


def release_values(
    context: str, release: str, namespace: str, kubeconfig: str | None = None
) -> dict[str, Any] | None:
    """Computed values of the deployed release; None when the release is not installed yet."""
    command = [
        str(toolchain.helm(3)),
        "get",
        "values",
        release,
        "--all",
        "-o",
        "json",
        "--namespace",
        namespace,
        "--kube-context",
        context,
    ]
    if kubeconfig:
        command += ["--kubeconfig", kubeconfig]
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise UserError(f"--kube-context {context}: the cluster did not answer within 60 s") from None
    if run.returncode != 0:
        if "not found" in run.stderr:
            return None
        raise UserError(
            f"--kube-context {context}: cannot read release {release} in {namespace}: "
            f"{run.stderr.strip()[:300]}"
        )
    data = json.loads(run.stdout or "{}")
    return data if isinstance(data, dict) else {}
