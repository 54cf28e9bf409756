"""The real-engine rig for tests/engine/: two vLLM CPU replicas of the tiny generated model.

Started once (about a minute and a half on two busy cores) for the first engine test, stopped after
the last one, so later test folders do not share the cores with idle engines. Needs .venv-engine
(toolchain/engine.sh); without it every engine test skips locally and fails under CI.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig.errors import RigError

HERE = Path(__file__).parent
_running: list[engine_rig.EngineRig] = []


@pytest.fixture(scope="session")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[engine_rig.EngineRig | str]:
    """The running rig, or a string saying why it could not start (tests turn that into need())."""
    try:
        engine_rig.engine_python()
    except RigError as error:
        yield str(error)
        return
    with engine_rig.EngineRig(tmp_path_factory.mktemp("rig")) as running:
        _running.append(running)
        yield running


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the engines as soon as the run leaves this folder (stop() is idempotent)."""
    if _running and (nextitem is None or HERE not in Path(nextitem.fspath).parents):
        _running.pop().stop()


@pytest.fixture
def engines(rig: engine_rig.EngineRig | str, need) -> engine_rig.EngineRig:
    need(not isinstance(rig, str), f"engine rig unavailable: {rig}")
    assert isinstance(rig, engine_rig.EngineRig)
    assert rig.started, "the rig was stopped (engine tests must run together)"
    return rig


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest, need) -> Path:
    """A scratch directory per test module for the probe-based tests (no running rig needed, only the
    engine venv): named after the module."""
    try:
        engine_rig.engine_python()
    except RigError as error:
        need(False, f"engine rig unavailable: {error}")
    return tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_"))


@pytest.fixture(scope="session")
def run_probe() -> Callable[[Path, Path], subprocess.CompletedProcess[str]]:
    """`run_probe(script, request)`: a probe script on the engine venv's Python with its JSON request
    file; vLLM logs at WARNING, so stdout carries the probe's verdicts."""

    def run(script: Path, request: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(engine_rig.engine_python()), str(script), str(request)],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "VLLM_LOGGING_LEVEL": "WARNING"},
        )

    return run
