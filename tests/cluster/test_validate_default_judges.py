"""`kvtier validate` without --server or --offline, as a user runs it: every object is dry-run on the local
control plane, which the run starts, leaves up for the next run and an idle watcher stops; --offline, and
its environment variable, skip it and say so. The CLI runs as a process with the user's environment, not
the tests' offline default."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from kvtier import paths
from kvtier.cluster.common import binaries
from kvtier.cluster.kwok import lifecycle
from kvtier.validate.findings import SERVER
from kvtier.validate.layers import server
from kvtier.validate.options import IDLE_ENV, OFFLINE_ENV

IDLE_S = 4
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


def test_the_default_dry_runs_on_a_local_control_plane_kept_up_while_used(need, tmp_path: Path) -> None:
    absent = binaries.missing()
    need(not absent, f"control-plane binaries not built ({', '.join(absent)}): run `make cluster-tools`")
    ours = not lifecycle.running()  # a developer's `kvtier cluster up` is used instead, and left alone

    code, report = _validate(str(paths.VALUES / "cpu.yaml"))
    row = _server_row(report)
    assert code == 0 and row["status"] in ("ok", "warning"), row
    assert "objects on" in row["detail"], row
    if ours:
        assert "local control plane" in row["detail"], row
        assert lifecycle.running(server.LOCAL_CLUSTER), "stopped: the next run would start it again"

    code, report = _validate(str(_tolerations_mistake(tmp_path)))
    refused = [
        f
        for env in report["environments"]
        for f in env["findings"]
        if f["check"] == SERVER and f["severity"] == "error"
    ]
    assert code == 1 and refused, report
    assert any("tolerations" in f["message"] for f in refused), refused

    if ours:  # the watcher stops it once nobody has used it for IDLE_S seconds (it polls every IDLE_S)
        deadline = time.monotonic() + 120
        while lifecycle.running(server.LOCAL_CLUSTER) and time.monotonic() < deadline:
            time.sleep(2)
        assert not lifecycle.running(server.LOCAL_CLUSTER), f"still up {IDLE_S}s after its last use + 120s"


@pytest.mark.parametrize("how", [["--offline"], []], ids=["--offline", OFFLINE_ENV])
def test_offline_skips_the_api_server_and_says_so(how: list[str]) -> None:
    code, report = _validate(*how, str(paths.VALUES / "cpu.yaml"), env={} if how else {OFFLINE_ENV: "1"})
    row = _server_row(report)
    assert code == 0 and row["status"] == "skipped", row
    assert row["detail"].startswith("offline"), row
