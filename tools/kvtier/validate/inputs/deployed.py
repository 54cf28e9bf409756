"""Values of the release already deployed in a cluster (`--context`), for upgrade-only rules."""

from __future__ import annotations

import json
import os
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
    # Through the environment: $KUBECONFIG may list several files, which Helm merges as kubectl does.
    env = {**os.environ, "KUBECONFIG": kubeconfig} if kubeconfig else None
    where = f"--context {context}" + (f" (kubeconfig {kubeconfig})" if kubeconfig else "")
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    except subprocess.TimeoutExpired:
        raise UserError(f"{where}: the cluster did not answer within 60 s") from None
    if run.returncode != 0:
        if "not found" in run.stderr:
            return None
        raise UserError(f"{where}: cannot read release {release} in {namespace}: {run.stderr.strip()[:300]}")
    data = json.loads(run.stdout or "{}")
    return data if isinstance(data, dict) else {}
