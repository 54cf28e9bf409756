"""The real-engine rigs for tests/engine/: two vLLM CPU replicas of the tiny generated model.

`rig`: two plain replicas, started once (about a minute and a half on two busy cores) for the first
engine test that asks, stopped after the folder's last test. `tiered_rig(backend)`: two replicas of the
container the chart renders for values/cpu.yaml on one shared L2, one per cache backend, shared by every
module that asks for that backend (their prompts carry nonces, so no module sees another's KV). A test
that uses one is marked `tiered_rig(backend)`; those tests run together (pytest_collection_modifyitems),
and a rig stops as soon as the run leaves them, so no later test shares the cores with idle engines.
Needs .venv-engine (toolchain/engine.sh); without it every engine test skips locally and fails under CI.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig import tiers
from kvtier.engine_rig.errors import RigError

HERE = Path(__file__).parent
_running: list[engine_rig.EngineRig] = []
_tiered: dict[str, tiers.TieredRig] = {}  # backend -> its running tiered rig


def _backends(item: pytest.Item | None) -> set[str]:
    if item is None:
        return set()
    return {mark.args[0] for mark in item.iter_markers("tiered_rig")}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each backend's tests run together, where the first of them was: one rig start per backend."""
    first: dict[str, int] = {}
    anchors = []
    for index, item in enumerate(items):
        backends = sorted(_backends(item))
        anchor = index
        if backends and HERE in Path(item.fspath).parents:
            anchor = first.setdefault(backends[0], index)
        anchors.append((anchor, index))
    order = sorted(range(len(items)), key=lambda i: anchors[i])
    items[:] = [items[i] for i in order]


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


@pytest.fixture(scope="session")
def tiered_rig(tmp_path_factory: pytest.TempPathFactory, need) -> Iterator[Callable[[str], tiers.TieredRig]]:
    """`tiered_rig(backend)`: that backend's running tiered rig, started on first use (the test must be
    marked `tiered_rig(backend)`, or the rig stops after it)."""

    def get(backend: str) -> tiers.TieredRig:
        try:
            engine_rig.engine_python()
        except RigError as error:
            need(False, f"engine rig unavailable: {error}")
        if backend not in _tiered:
            running = tiers.TieredRig(tmp_path_factory.mktemp(f"tiered-{backend}"), backend=backend)
            _tiered[backend] = running.__enter__()  # stops itself if the start fails
        return _tiered[backend]

    yield get
    while _tiered:  # an interrupted run
        _tiered.popitem()[1].stop()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the engines as soon as the run leaves the tests that use them (stop() is idempotent): the
    plain rig when it leaves this folder, a tiered rig when it leaves its backend's tests."""
    if _running and (nextitem is None or HERE not in Path(nextitem.fspath).parents):
        _running.pop().stop()
    for backend in set(_tiered) - _backends(nextitem):
        _tiered.pop(backend).stop()


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
