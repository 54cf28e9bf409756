"""`kvtier soak`'s Curvine faults (issue 63 item 4): the leader named by `cv report json`
(kvtier.curvine_report), deleted and waited for through a fake API server whose StatefulSet brings the
master back under its own name; a worker forced; the rig and a release without Curvine refusing them with a
reason; and a failure under a Curvine fault never excused as a killed replica's is."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import (
    V1Container,
    V1ObjectMeta,
    V1Pod,
    V1PodCondition,
    V1PodSpec,
    V1PodStatus,
)

from kvtier import cli, curvine_report, exitcodes
from kvtier.load import driver, soak, soak_release, soak_rig
from kvtier.smoke import reach

pytestmark = pytest.mark.unit

MASTERS = "app.kubernetes.io/instance=cv,app.kubernetes.io/component=master"
WORKERS = "app.kubernetes.io/instance=cv,app.kubernetes.io/component=worker"


def report(leader: str) -> str:
    """`cv report json` as Curvine v0.4.1 prints it, a log line first (the CLI's own, on a terminal)."""
    info = {
        "active_master": f"{leader}.cv-curvine-master.store.svc.cluster.local:8995" if leader else "",
        "live_workers": [{"address": {"hostname": "node-b"}}, {"address": {"hostname": "node-a"}}],
    }
    return "2026-12-07 INFO client connected\n" + json.dumps(info, indent=2)


def test_the_report_names_the_leaders_pod_and_the_live_workers() -> None:
    info = curvine_report.parse(report("cv-curvine-master-1"))
    assert curvine_report.leader_pod(info) == "cv-curvine-master-1"
    assert curvine_report.worker_hosts(info) == ["node-a", "node-b"]
    assert curvine_report.leader_pod(curvine_report.parse(report(""))) == ""  # an election under way
    with pytest.raises(curvine_report.ReportError, match="printed no JSON"):
        curvine_report.parse("error: connection refused\n")
    with pytest.raises(curvine_report.ReportError, match="broken JSON"):
        curvine_report.parse('{"active_master": ')


def test_the_workers_selector_is_the_masters_with_the_component_swapped() -> None:
    assert curvine_report.component_selector(MASTERS, "worker") == WORKERS
    assert curvine_report.component_selector("app=curvine", "worker") is None
    pods = soak_release.CurvinePods.from_masters("store", "app=curvine")
    subject = release(pods)
    assert "no app.kubernetes.io/component=master term" in subject.unsupported("curvine-worker")
    assert subject.unsupported("curvine-leader") == ""


def pod(name: str, uid: str, ready: bool = True) -> V1Pod:
    condition = V1PodCondition(type="Ready", status="True" if ready else "False")
    return V1Pod(
        metadata=V1ObjectMeta(name=name, uid=uid),
        spec=V1PodSpec(containers=[V1Container(name="master")]),
        status=V1PodStatus(phase="Running", conditions=[condition]),
    )


class CurvineApi:
    """Curvine's pods as the API server lists them: a deleted pod stays listed for `listed_for` listings,
    then its controller's replacement appears under `renamed(name)` (a StatefulSet: the same name) with a
    new uid, not Ready for `unready_for` more listings."""

    def __init__(
        self, listed_for: int = 2, unready_for: int = 2, renamed: Callable[[str], str] = str
    ) -> None:
        self.pods = {
            MASTERS: [pod(f"cv-curvine-master-{i}", f"m{i}") for i in range(3)],
            WORKERS: [pod("cv-curvine-worker-a", "wa"), pod("cv-curvine-worker-b", "wb")],
        }
        self.listed_for, self.unready_for, self.renamed = listed_for, unready_for, renamed
        self.deleted: list[tuple[str, str, Any]] = []
        self.lists = 0

    def delete_namespaced_pod(self, name: str, namespace: str, **options: Any) -> None:
        self.deleted.append((name, namespace, options.get("grace_period_seconds")))
        self.lists = 0

    def list_namespaced_pod(self, namespace: str, label_selector: str) -> Any:
        assert namespace == "store"
        pods = self.pods[label_selector]
        if self.deleted:
            self.lists += 1
            victim = self.deleted[-1][0]
            if self.lists == self.listed_for + 1:
                pods[:] = [p for p in pods if p.metadata.name != victim]
                pods.append(pod(self.renamed(victim), "new", ready=False))
            if self.lists > self.listed_for + self.unready_for:
                pods[-1] = pod(pods[-1].metadata.name, "new")
        return type("PodList", (), {"items": list(pods)})()


def release(curvine: soak_release.CurvinePods | None, api: Any = None) -> soak_release.ReleaseSubject:
    """A release whose engines mount no filesystem L2 (its clock is this machine's)."""
    selectors = reach.Selectors.for_release("kv")
    return soak_release.ReleaseSubject(lambda: api, "inference", selectors, None, False, curvine)


def test_the_leader_is_deleted_and_the_fault_lasts_until_its_replacement_and_a_leader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = CurvineApi()
    subject = release(soak_release.CurvinePods.from_masters("store", MASTERS), api)
    asked: list[str] = []

    def exec_text(_api: Any, namespace: str, pod_name: str, script: str) -> str:
        assert namespace == "store" and script == curvine_report.REPORT_SCRIPT
        asked.append(pod_name)
        if pod_name == "cv-curvine-master-0" and api.deleted and len(asked) < 6:
            raise RuntimeError("connection refused")  # an election under way: the next master is asked
        return report("" if api.deleted and len(asked) < 8 else "cv-curvine-master-1")

    monkeypatch.setattr(soak_release, "exec_text", exec_text)
    monkeypatch.setattr(soak_release.waiting.time, "sleep", lambda _s: None)
    monkeypatch.setattr(soak, "CONFIRM_S", 2.0)  # a pod told apart by name alone is never seen gone
    confirmed: list[int] = []
    subject.kill_curvine("leader", lambda: confirmed.append(api.lists))
    # Deleted with its own grace period, confirmed only once the old uid was gone, though the StatefulSet
    # brought it back under the same name; then held until a report named a leader again.
    assert api.deleted == [("cv-curvine-master-1", "store", None)]
    assert confirmed == [3]
    assert len(asked) >= 8 and "cv-curvine-master-1" in asked[1:]


def test_a_worker_is_forced_and_the_fault_lasts_until_its_replacement_is_ready(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = CurvineApi(renamed=lambda _name: "cv-curvine-worker-c")  # a DaemonSet: a new name
    subject = release(soak_release.CurvinePods.from_masters("store", MASTERS), api)
    monkeypatch.setattr(soak_release.waiting.time, "sleep", lambda _s: None)
    confirmed: list[int] = []
    subject.kill_curvine("worker", lambda: confirmed.append(api.lists))
    assert api.deleted == [("cv-curvine-worker-b", "store", 0)] and confirmed == [3]
    assert api.lists == 5  # returned once the replacement was Ready, not at the delete's confirmation


def test_a_leader_no_report_names_is_a_fault_that_could_not_be_injected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = CurvineApi()
    subject = release(soak_release.CurvinePods.from_masters("store", MASTERS), api)
    monkeypatch.setattr(soak_release, "exec_text", lambda *_args: report(""))
    result = soak.inject("curvine-leader", subject, threading.Event(), soak.Timing(at_s=0.0), seed=0)
    assert "named a Raft leader" in result.error and api.deleted == []


def test_without_curvine_a_release_and_the_rig_refuse_its_faults_and_say_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for fault in soak.CURVINE_FAULTS:
        assert "--curvine-namespace" in release(None).unsupported(fault)
        assert "local folder" in soak_rig.RigSubject(None, None).unsupported(fault)  # type: ignore[arg-type]
    with pytest.raises(soak.RigError, match="on the rig, curvine-worker: the rig's L2 is a local folder"):
        soak_rig.run(["none", "curvine-worker"], soak.workload.Mix(requests=2), 1.0, tmp_path, print)
    assert not (tmp_path / "reference").exists()  # refused before the references
    argv = ["soak", "--rig", "--faults", "curvine-leader", "--requests", "1", "--out", str(tmp_path / "out")]
    assert cli.main(argv) == exitcodes.USAGE
    assert "curvine-leader: the rig's L2 is a local folder" in capsys.readouterr().err
    assert (
        cli.main([*argv[:4], "--curvine-namespace", "store", "--out", str(tmp_path / "o")]) == exitcodes.USAGE
    )
    assert "leave out --curvine-namespace" in capsys.readouterr().err


class Killing:
    """A soak.Subject whose Curvine part is deleted and back at once."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def clock_ns(self) -> int:
        return 0

    def kill_curvine(self, part: str, killed: Callable[[], None]) -> None:
        self.parts.append(part)
        killed()


def test_a_failure_under_a_curvine_fault_is_not_excused_as_a_replica_down() -> None:
    subject = Killing()
    for fault, part in (("curvine-leader", "leader"), ("curvine-worker", "worker")):
        result = soak.inject(fault, subject, threading.Event(), soak.Timing(at_s=0.0), seed=0)  # type: ignore[arg-type]
        assert subject.parts[-1] == part and not result.error and "recovered_s" in result.figures
        assert result.down == []  # every engine kept serving: nothing explains a failure
        failed = {"hash_ids": [1], "text": "", "sent_s": 0.0, "ok": False, "error": "502"}
        points = driver.Point(3.0, [failed], 10.0, {}, [1])
        r = soak.row(fault, points, {(1,): "alpha"}, result, rejected=0)
        assert (r["failed_while_down"], r["failed_otherwise"]) == (0, 1) and not soak.clean([r])
