"""hostpath-writable-by-user (kvtier.validate.checks.hostpath_rules): a non-root container that writes a
hostPath of type DirectoryOrCreate, which the kubelet creates root-owned (0755) where the node lacks it."""

from __future__ import annotations

from typing import Any

import pytest

from harness.manifests import run_rule, workload
from kvtier.validate import catalogue
from kvtier.validate.checks.hostpath_rules import non_root
from kvtier.validate.findings import Finding

RULE = "hostpath-writable-by-user"
DATA = "/opt/dlami/nvme/curvine-data"


def _daemonset(
    pod_sc: dict[str, Any] | None = None,
    sc: dict[str, Any] | None = None,
    kind: str = "DirectoryOrCreate",
    read_only: bool = False,
) -> dict[str, Any]:
    mount: dict[str, Any] = {"name": "data-0", "mountPath": DATA}
    if read_only:
        mount["readOnly"] = True
    container: dict[str, Any] = {"name": "worker", "image": "c:v1", "volumeMounts": [mount]}
    if sc is not None:
        container["securityContext"] = sc
    pod: dict[str, Any] = {
        "containers": [container],
        "volumes": [
            {"name": "tmp", "emptyDir": {}},
            {"name": "data-0", "hostPath": {"path": DATA, "type": kind}},
        ],
    }
    if pod_sc is not None:
        pod["securityContext"] = pod_sc
    return workload(pod, name="w", kind="DaemonSet")


def _run(*manifests: dict[str, Any]) -> list[Finding]:
    return run_rule(RULE, *manifests)


def test_the_rule_is_registered_with_its_sources() -> None:
    r = catalogue.all_rules()[RULE]
    assert r.scope == "manifests" and "MakeDir" in r.reason and "0755" in r.reason


@pytest.mark.parametrize(
    ("pod_sc", "sc", "who", "field"),
    [
        (
            {"runAsNonRoot": True, "runAsUser": 1000},
            None,
            "UID 1000",
            "spec.template.spec.securityContext.runAsUser",
        ),
        ({"runAsUser": 0}, {"runAsUser": 65532}, "UID 65532", "containers[0].securityContext.runAsUser"),
        ({"runAsNonRoot": True}, None, "non-root user", "spec.template.spec.securityContext.runAsNonRoot"),
        (None, {"runAsNonRoot": True}, "non-root user", "containers[0].securityContext.runAsNonRoot"),
    ],
)
def test_a_non_root_writer_is_a_warning_naming_what_decides(
    pod_sc: dict[str, Any] | None, sc: dict[str, Any] | None, who: str, field: str
) -> None:
    [f] = _run(_daemonset(pod_sc, sc))
    assert f.severity == "warning" and f.rule == RULE
    assert who in f.message and DATA in f.message and "0755" in f.message
    assert "kubectl debug node/" in f.message and f"ls -ld /host{DATA}" in f.message
    assert f.path.endswith(field)


@pytest.mark.parametrize(
    ("pod_sc", "sc"),
    [
        ({"runAsNonRoot": False, "runAsUser": 0}, None),  # the Curvine chart's worker default
        ({"runAsUser": 1000}, {"runAsUser": 0}),  # the container's own setting wins
        (None, None),  # the image's user: may be root, not known here
        ({"runAsNonRoot": False}, None),
    ],
)
def test_root_or_an_unknown_user_passes(pod_sc: dict[str, Any] | None, sc: dict[str, Any] | None) -> None:
    assert _run(_daemonset(pod_sc, sc)) == []


def test_only_a_directory_the_kubelet_creates_and_the_container_writes_counts() -> None:
    user = {"runAsUser": 1000}
    assert _run(_daemonset(user, kind="Directory")) == []
    assert _run(_daemonset(user, kind="")) == []
    assert _run(_daemonset(user, read_only=True)) == []
    windows = _daemonset(user)
    windows["spec"]["template"]["spec"]["os"] = {"name": "windows"}
    assert _run(windows) == []


def test_non_root_reads_the_effective_context() -> None:
    spec = {"securityContext": {"runAsUser": 7}}
    assert non_root(spec, "spec", {}, "spec.containers[0]") == ("UID 7", "spec.securityContext.runAsUser")
    assert non_root(spec, "spec", {"securityContext": {"runAsUser": 0}}, "c") is None
    assert non_root({"securityContext": {"runAsUser": True}}, "spec", {}, "c") is None
