"""`kvtier preflight`: checks a live cluster against one environment's values before installing.

Rules are declared in rules.py; the checks (checks.py, hyperpod_checks.py) return data; report.py
renders it. The install's objects come from `helm template` of the real chart with the cluster's version
and APIs, so the RBAC and CRD-field checks ask about exactly what would be created.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from kubernetes import config

from kvtier import exitcodes
from kvtier.cluster.common import discovery
from kvtier.cluster.common.rest import ApiException, Rest
from kvtier.errors import UserError
from kvtier.preflight import checks, hyperpod_checks, inputs
from kvtier.preflight.model import Result, Target
from kvtier.preflight.rules import RULES

CHECKS: dict[str, Callable[[Target], Result]] = {
    "k8s-version": checks.k8s_version,
    "rbac": checks.rbac,
    "gpu-nodes": checks.gpu_nodes,
    "nvme-nodes": checks.nvme_nodes,
    "storage-conflicts": checks.storage_conflicts,
    "pod-security": checks.pod_security,
    "release-immutable": checks.release_immutable,
    "hyperpod-crds": hyperpod_checks.hyperpod_crds,
    "cert-manager": hyperpod_checks.cert_manager,
    "tiered-storage": hyperpod_checks.tiered_storage,
    "admission-policy": hyperpod_checks.admission_policy,
}
assert CHECKS.keys() == RULES.keys(), "every rule has exactly one check"


def connect(kubeconfig: str | None, context: str | None) -> Rest:
    """A client for the chosen kubeconfig/context, verified to answer; UserError otherwise."""
    where = f"kubeconfig {kubeconfig or '(default)'}, context {context or '(current)'}"
    # A malformed entry (a cluster without a server, a list where a mapping belongs) raises plain
    # Python errors from the client's loader: all of them are the kubeconfig's, for the user to fix.
    try:
        rest = Rest.from_kubeconfig(kubeconfig, context)
    except (config.ConfigException, OSError, ValueError, TypeError, KeyError, AttributeError) as error:
        raise UserError(f"cannot load {where}: {error}") from None
    try:
        rest.request("GET", "/version", timeout=10)
    except Exception as error:  # unreachable server, TLS, auth: all mean "not usable"
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UserError(f"cannot reach the API server {rest.host} ({where}): {first}") from None
    return rest


def run(file: Path, release: str, namespace: str, rest: Rest) -> list[Result]:
    """Every check, in rule order: `file` installed as `release` in `namespace` on the cluster `rest`."""
    target = Target(inputs.effective_values(file), release, namespace, rest)
    try:
        version = rest.get("/version")["gitVersion"]
        target.manifests = inputs.render(
            file, release, namespace, version, discovery.api_versions_for_helm(rest)
        )
    except (RuntimeError, UserError, OSError, subprocess.SubprocessError) as error:  # a refusal, no chart
        target.render_error = str(error).splitlines()[0] if str(error) else type(error).__name__
    results = []
    for rule_id, check in CHECKS.items():
        if RULES[rule_id].hyperpod_only and not target.hyperpod:
            results.append(Result(rule_id, "skip", "target is standalone"))
            continue
        try:
            results.append(check(target))
        except ApiException as error:
            results.append(
                Result(rule_id, "warn", f"could not check: API answered {error.status} {error.reason}")
            )
    return results


def exit_code(results: list[Result]) -> int:
    return exitcodes.FINDINGS if any(r.status == "fail" for r in results) else exitcodes.OK
