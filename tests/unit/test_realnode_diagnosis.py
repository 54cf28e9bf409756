"""The one-line diagnosis of pods that are not Ready, on the object shapes the API server returns
(Kubernetes API reference: NodeCondition, PodStatus, ContainerStatus, core/v1 Event)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kvtier.cluster.realnode import diagnosis

UNSCHEDULABLE = (
    "0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/disk-pressure: }."
)
NODE = {
    "status": {
        "conditions": [
            {"type": "MemoryPressure", "status": "False"},
            {"type": "DiskPressure", "status": "True"},
            {"type": "PIDPressure", "status": "False"},
            {"type": "Ready", "status": "True"},
        ]
    }
}
READY_POD = {
    "metadata": {"name": "router-1"},
    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
}
CRASHING_POD = {
    "metadata": {"name": "engine-1"},
    "status": {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "False"}],
        "containerStatuses": [
            {
                "name": "vllm",
                "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
            }
        ],
    },
}
EVICTED_POD = {
    "metadata": {"name": "engine-2"},
    "status": {"phase": "Failed", "reason": "Evicted", "message": "The node was low on resource"},
}
PENDING_POD = {
    "metadata": {"name": "engine-3"},
    "status": {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": UNSCHEDULABLE,
            }
        ],
    },
}
DONE_POD = {"metadata": {"name": "test-1"}, "status": {"phase": "Succeeded"}}


def _event(kind: str, reason: str, when: str) -> dict:
    return {"type": kind, "reason": reason, "message": f"{reason}\n  at {when}", "lastTimestamp": when}


def test_only_what_is_not_as_a_healthy_node_has_it_is_named() -> None:
    assert diagnosis.node_conditions([NODE]) == ["node DiskPressure=True"]
    not_ready = {"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}
    assert diagnosis.node_conditions([not_ready]) == ["node Ready=Unknown"]


def test_each_pod_that_is_not_ready_says_why() -> None:
    states = diagnosis.pod_states([READY_POD, CRASHING_POD, EVICTED_POD, PENDING_POD, DONE_POD])
    assert states == [
        "pod engine-1: Running, vllm CrashLoopBackOff, vllm last exit OOMKilled (137), 3 restarts",
        "pod engine-2: Failed, Evicted",
        f"pod engine-3: Pending, {UNSCHEDULABLE}",
    ]


def test_the_newest_warnings_come_last_on_one_line_each() -> None:
    events = [_event("Warning", f"W{i}", f"2026-12-03T10:0{i}:00Z") for i in (5, 1, 3, 2, 4)]
    events.append(_event("Normal", "Pulled", "2026-12-03T10:09:00Z"))
    assert diagnosis.warnings(events) == [f"W{i}: W{i} at 2026-12-03T10:0{i}:00Z" for i in (2, 3, 4, 5)]


class FakeKubectl:
    """Answers `kubectl get KIND -o json` from a table; an unknown kind is an API server that is down."""

    def __init__(self, items: dict[str, list[dict]]) -> None:
        self.items = items

    def kubectl(self, *args: str, stdin: str = "", check: bool = True) -> str:
        kind = args[1]
        if kind not in self.items:
            return "The connection to the server was refused"
        return json.dumps({"items": self.items[kind]})


def test_the_line_joins_every_part_and_survives_an_api_server_that_is_down(tmp_path: Path) -> None:
    kube = FakeKubectl({"nodes": [NODE], "pods": [EVICTED_POD], "events": []})
    line = diagnosis.why_not_ready(kube, "ns", tmp_path)
    assert line.startswith("node DiskPressure=True; pod engine-2: Failed, Evicted; ")
    assert line.endswith(f"GiB at {tmp_path}") and "\n" not in line
    down = diagnosis.why_not_ready(FakeKubectl({}), "ns", tmp_path)
    assert re.fullmatch(rf"[0-9.]+ GiB free of [0-9]+ GiB at {re.escape(str(tmp_path))}", down), down


def test_a_failed_step_is_raised_again_with_the_diagnosis_first(tmp_path: Path) -> None:
    kube = FakeKubectl({"nodes": [NODE], "pods": [], "events": []})
    with pytest.raises(AssertionError) as raised, diagnosis.explained(kube, "ns", tmp_path, "install"):
        raise AssertionError("Error: INSTALLATION FAILED: context deadline exceeded")
    first, rest = str(raised.value).split("\n", 1)
    assert first.startswith("install: node DiskPressure=True; ")
    assert rest == "Error: INSTALLATION FAILED: context deadline exceeded"
