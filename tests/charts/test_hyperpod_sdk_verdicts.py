"""The HyperPod SDK's verdicts are kept by spec: a second run with the same endpoints starts no SDK process,
gives the same answers, and a changed spec (or another worker) is asked again. Uses the real SDK venv."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from kvtier.upstream import hyperpod_sdk

SPEC = {
    "modelName": "qwen2-7b",
    "instanceType": "ml.g6e.4xlarge",
    "invocationEndpoint": "v1/chat/completions",
    "modelSourceConfig": {"modelSourceType": "s3", "s3Storage": {"bucketName": "b", "region": "us-east-1"}},
    "worker": {
        "image": "registry.example/engine:pinned",
        "modelInvocationPort": {"containerPort": 8000},
        "resources": {},
        "modelVolumeMount": {"name": "m", "mountPath": "/opt/ml/model"},
    },
    "unknownTopLevel": 1,
}


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, need) -> list[int]:
    need(not hyperpod_sdk.missing(), hyperpod_sdk.missing())
    monkeypatch.setenv("KVTIER_HYPERPOD_VERDICTS", str(tmp_path / "verdicts"))
    counted: list[int] = []
    real = hyperpod_sdk._call

    def counting(command: str, payload: dict | None = None) -> dict:
        counted.append(len((payload or {}).get("specs", [])))
        return real(command, payload)

    monkeypatch.setattr(hyperpod_sdk, "_call", counting)
    return counted


def test_a_repeated_spec_is_read_back_not_asked_again(calls: list[int]) -> None:
    broken = copy.deepcopy(SPEC)
    broken["worker"]["modelInvocationPort"]["containerPort"] = "not a port"
    first = hyperpod_sdk.validate_specs([SPEC, broken, SPEC])
    assert calls == [2]  # one SDK process, each distinct spec once
    assert any(p.unknown and p.path == "spec.unknownTopLevel" for p in first[0])
    assert any(not p.unknown for p in first[1]), first[1]  # the SDK refuses the port
    assert first[0] == first[2]

    again = hyperpod_sdk.validate_specs([SPEC, broken])
    assert calls == [2] and again == first[:2]

    changed = {**SPEC, "modelName": "other"}
    hyperpod_sdk.validate_specs([changed, SPEC])
    assert calls == [2, 1]


def test_a_changed_worker_asks_again(calls: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    hyperpod_sdk.validate_specs([SPEC])
    monkeypatch.setattr(hyperpod_sdk, "_judge_identity", lambda: "another worker")
    hyperpod_sdk.validate_specs([SPEC])
    assert calls == [1, 1]
