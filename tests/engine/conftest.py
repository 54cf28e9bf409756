"""The real-engine rig for tests/engine/: two vLLM CPU replicas of the tiny generated model.

Started once per session (about a minute on two cores), stopped at the end. Needs .venv-engine
(toolchain/engine.sh); without it every engine test skips locally and fails under CI.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig.errors import RigError


@pytest.fixture(scope="session")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[engine_rig.EngineRig | str]:
    """The running rig, or a string saying why it could not start (tests turn that into need())."""
    try:
        engine_rig.engine_python()
    except RigError as error:
        yield str(error)
        return
    work: Path = tmp_path_factory.mktemp("rig")
    with engine_rig.EngineRig(work) as running:
        yield running


@pytest.fixture
def engines(rig: engine_rig.EngineRig | str, need) -> engine_rig.EngineRig:
    need(not isinstance(rig, str), f"engine rig unavailable: {rig}")
    assert isinstance(rig, engine_rig.EngineRig)
    return rig
