"""`kvtier validate` without --server or --offline, as a user runs it: every object is dry-run on the local
control plane, which the run starts, leaves up for the next run and an idle watcher stops; --offline, and
its environment variable, skip it and say so. The CLI runs as a process with the user's environment, not
the tests' offline default.

A test run owns its state (tests/conftest.py): its validate starts a control plane of its own name in the
test runs' folder, so a user's `kvtier validate` kept up beside `make test` is neither reused nor stopped;
the first test proves it with a stand-in for the user's folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from kvtier import paths
from kvtier.cluster.common import binaries
from kvtier.cluster.kwok import lifecycle, sharing
from kvtier.validate.findings import SERVER
from kvtier.validate.layers import server
from kvtier.validate.options import CLUSTER_DEFAULT, CLUSTER_ENV, IDLE_ENV, OFFLINE_ENV

IDLE_S = 4
USERS_IDLE_S = 900  # the user's control plane outlives the test; the test stops it at its end
FAST = ["--helm", "3", "--kube-versions", "1.35", "-o", "json"]


def _validate(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict]:
    environ = {k: v for k, v in os.environ.items() if k != OFFLINE_ENV}
    environ.update({IDLE_ENV: str(IDLE_S), **(env or {})})
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("kvtier")), "validate", *FAST, *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=600,
    )
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


def _server_row(report: dict) -> dict:
    [env] = report["environments"]
    return env["checks"][SERVER]


def _tolerations_mistake(tmp_path: Path) -> Path:
    """A model whose toleration gives a value with operator Exists: the API server refuses the pod."""
    values = yaml.safe_load((paths.VALUES / "cpu.yaml").read_text())
    values["models"][0]["tolerations"] = [{"key": "gpu", "operator": "Exists", "value": "x"}]
    path = tmp_path / "exists-with-value.yaml"
    path.write_text(yaml.safe_dump(values, sort_keys=False))
    return path


@contextmanager
def _state(folder: Path) -> Iterator[None]:
    """lifecycle and sharing calls in this process look into `folder` for the duration."""
    before = os.environ[binaries.STATE_ENV]
    os.environ[binaries.STATE_ENV] = str(folder)
    try:
        yield
    finally:
        os.environ[binaries.STATE_ENV] = before


def test_the_default_dry_runs_on_a_control_plane_of_its_own_kept_up_while_used(need, tmp_path: Path) -> None:
    absent = binaries.missing()
    need(not absent, f"control-plane binaries not built ({', '.join(absent)}): run `make cluster-tools`")
    own = server.local_cluster()
    assert own != CLUSTER_DEFAULT, "the test run names its control plane (tests/conftest.py)"
    assert not lifecycle.running(lifecycle.DEFAULT_NAME), "no `kvtier cluster up` in the test runs' folder"

    # A user's `kvtier validate`, run beside the tests with the user's defaults (their own state folder,
    # the default name), keeps its control plane up for the next run.
    users = tmp_path / "users-state"
    user_env = {binaries.STATE_ENV: str(users), CLUSTER_ENV: "", IDLE_ENV: str(USERS_IDLE_S)}
    code, report = _validate(str(paths.VALUES / "cpu.yaml"), env=user_env)
    assert code == 0 and "local control plane" in _server_row(report)["detail"], _server_row(report)
    with _state(users):
        assert lifecycle.running(CLUSTER_DEFAULT)
        users_last_use = sharing.last_used(CLUSTER_DEFAULT)
    try:
        code, report = _validate(str(paths.VALUES / "cpu.yaml"))
        row = _server_row(report)
        assert code == 0 and row["status"] in ("ok", "warning"), row
        assert "local control plane" in row["detail"] and "objects on" in row["detail"], row
        assert lifecycle.running(own), "stopped: the next run would start it again"

        code, report = _validate(str(_tolerations_mistake(tmp_path)))
        refused = [
            f
            for env in report["environments"]
            for f in env["findings"]
            if f["check"] == SERVER and f["severity"] == "error"
        ]
        assert code == 1 and refused, report
        assert any("tolerations" in f["message"] for f in refused), refused

        # The watcher stops it once nobody has used it for IDLE_S seconds (it polls every IDLE_S).
        deadline = time.monotonic() + 120
        while lifecycle.running(own) and time.monotonic() < deadline:
            time.sleep(2)
        assert not lifecycle.running(own), f"still up {IDLE_S}s after its last use + 120s"

        with _state(users):
            assert lifecycle.running(CLUSTER_DEFAULT), "the test run stopped the user's control plane"
            assert sharing.last_used(CLUSTER_DEFAULT) == users_last_use, "the test run used the user's"
    finally:
        with _state(users):
            lifecycle.down(CLUSTER_DEFAULT, progress=lambda _: None)


@pytest.mark.parametrize("how", [["--offline"], []], ids=["--offline", OFFLINE_ENV])
def test_offline_skips_the_api_server_and_says_so(how: list[str]) -> None:
    code, report = _validate(*how, str(paths.VALUES / "cpu.yaml"), env={} if how else {OFFLINE_ENV: "1"})
    row = _server_row(report)
    assert code == 0 and row["status"] == "skipped", row
    assert row["detail"].startswith("offline"), row
