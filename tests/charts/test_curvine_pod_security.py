"""Pod Security levels of the curvine chart's pods, as the README states them.

A stand-in for the API server's Pod Security admission (which the cluster tests exercise for real):
the main `restricted` and `baseline` rules of https://kubernetes.io/docs/concepts/security/pod-security-standards/
checked on the rendered pod specs.
"""

from __future__ import annotations

from typing import Any

import pytest
from render import helm_bin, render_docs

RESTRICTED_VOLUMES = {"configMap", "emptyDir", "persistentVolumeClaim", "secret", "projected", "downwardAPI"}


def pod_specs(need) -> dict[str, dict[str, Any]]:
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    docs = render_docs("curvine", set_values={"pvc.enabled": True})
    specs = {}
    for doc in docs:
        spec = doc["spec"] if doc["kind"] == "Pod" else doc.get("spec", {}).get("template", {}).get("spec")
        if spec:
            specs[doc["metadata"]["name"]] = spec
    return specs


def violations(spec: dict[str, Any]) -> set[str]:
    """Rule names a pod spec breaks (baseline ones first, then restricted ones)."""
    found = set()
    pod_sc = spec.get("securityContext", {})
    if spec.get("hostNetwork") or spec.get("hostPID") or spec.get("hostIPC"):
        found.add("baseline:host-namespaces")
    for volume in spec.get("volumes", []):
        kind = next(k for k in volume if k != "name")
        if kind == "hostPath":
            found.add("baseline:hostPath")
        elif kind not in RESTRICTED_VOLUMES:
            found.add(f"restricted:volume-{kind}")
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        sc = c.get("securityContext", {})
        if sc.get("privileged"):
            found.add("baseline:privileged")
        if set(sc.get("capabilities", {}).get("add", [])) - {"NET_BIND_SERVICE"}:
            found.add("restricted:capabilities-add")
        if sc.get("capabilities", {}).get("drop") != ["ALL"]:
            found.add("restricted:capabilities-drop-all")
        if sc.get("allowPrivilegeEscalation") is not False:
            found.add("restricted:allowPrivilegeEscalation")
        if not sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")):
            found.add("restricted:runAsNonRoot")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
            found.add("restricted:runAsUser-0")
        seccomp = sc.get("seccompProfile", pod_sc.get("seccompProfile", {})).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.add("restricted:seccomp")
    return found


@pytest.mark.parametrize(
    "name",
    [
        "rel-curvine-master",
        "rel-curvine-csi-controller",
        "rel-curvine-test-workers",
        "rel-curvine-test-crossnode",
    ],
)
def test_restricted_pods(name: str, need) -> None:
    assert violations(pod_specs(need)[name]) == set()


def test_workers_need_privileged_level_only_for_hostpath_and_root(need) -> None:
    # Unprivileged container, but hostPath volumes (not allowed by baseline) and UID 0 by default.
    assert violations(pod_specs(need)["rel-curvine-worker"]) == {
        "baseline:hostPath",
        "restricted:runAsNonRoot",
        "restricted:runAsUser-0",
    }


def test_only_the_csi_node_plugin_is_privileged(need) -> None:
    privileged = {name for name, spec in pod_specs(need).items() if "baseline:privileged" in violations(spec)}
    assert privileged == {"rel-curvine-csi-node"}
