"""The StorageClass reader behind l2-storageclass-gives-rwx (kvtier.validate.layers.storage_classes) and
who is asked (live_judges.storage_classes), against a stand-in for the REST client: what a cluster answers
becomes a provisioner, or the reason it could not be read. The real API server's answers are in
tests/cluster/test_validate_server.py."""

from __future__ import annotations

from typing import Any

import pytest

from kvtier.cluster.common.rest import ApiException
from kvtier.validate.layers import live_judges, server, storage_classes
from kvtier.validate.options import Options


class Served:
    """A REST client that serves StorageClasses by name, or raises `error` for every request."""

    def __init__(self, classes: dict[str, Any], error: Exception | None = None) -> None:
        self.classes, self.error, self.asked = classes, error, []

    def find(self, path: str) -> Any:
        self.asked.append(path)
        if self.error is not None:
            raise self.error
        name = path.rsplit("/", 1)[-1]
        return self.classes.get(name)


def test_a_served_class_gives_its_provisioner_once_per_name() -> None:
    rest = Served({"gp2": {"metadata": {"name": "gp2"}, "provisioner": "efs.csi.aws.com"}})
    read = storage_classes.reader(rest, "context prod", release_cluster=True)
    assert read("gp2") == storage_classes.ClusterClass("gp2", "context prod", "efs.csi.aws.com")
    read("gp2")
    assert rest.asked == ["/apis/storage.k8s.io/v1/storageclasses/gp2"]


def test_a_name_is_quoted_into_the_path() -> None:
    rest = Served({})
    storage_classes.reader(rest, "context prod", release_cluster=True)("a/../b")
    assert rest.asked == ["/apis/storage.k8s.io/v1/storageclasses/a%2F..%2Fb"]


@pytest.mark.parametrize(
    ("classes", "error", "problem"),
    [
        ({}, None, "no StorageClass 'gp2' on context prod"),
        (
            {"gp2": {"metadata": {"name": "gp2"}}},
            None,
            "StorageClass 'gp2' on context prod names no provisioner",
        ),
        ({}, ApiException(status=403, reason="Forbidden"), "reading it on context prod: 403 Forbidden"),
        ({}, ConnectionRefusedError("refused"), "context prod did not answer: refused"),
    ],
)
def test_a_class_not_read_says_why(classes: dict[str, Any], error: Exception | None, problem: str) -> None:
    found = storage_classes.reader(Served(classes, error), "context prod", release_cluster=True)("gp2")
    assert found.provisioner == "" and found.problem == problem
    assert found.absent == (not classes and error is None)  # only a class the cluster says it lacks


def test_a_class_missing_on_a_control_plane_of_validates_own_is_not_absent() -> None:
    found = storage_classes.reader(Served({}), "a local control plane", release_cluster=False)("gp2")
    assert not found.absent and found.problem == "no StorageClass 'gp2' on a local control plane"


def test_the_judging_server_is_asked_else_the_context_else_nobody(monkeypatch: pytest.MonkeyPatch) -> None:
    rest = Served({"gp2": {"provisioner": "efs.csi.aws.com"}})
    judge = server.Judge(rest, "kvtier", "context prod")  # type: ignore[arg-type]
    assert live_judges.storage_classes(judge, Options())("gp2").where == "context prod"
    assert live_judges.storage_classes(judge, Options())("efs").absent
    local = server.Judge(rest, "kvtier", "a local control plane", local=True)  # type: ignore[arg-type]
    assert not live_judges.storage_classes(local, Options())("efs").absent
    assert live_judges.storage_classes(None, Options()) is None
    assert live_judges.storage_classes("no API server could be had", Options()) is None
    monkeypatch.setattr(live_judges, "_context_rest", lambda context, kubeconfig: rest)
    read = live_judges.storage_classes(None, Options(kube_context="staging"))
    assert read("gp2").provisioner == "efs.csi.aws.com" and read("gp2").where == "context staging"
    assert read("efs").absent
