"""Fixtures of the preflight cluster tests: the environment to check and a namespace to check it in."""

from __future__ import annotations

from pathlib import Path

import pytest
from preflight_support import HYPERPOD, STANDALONE


@pytest.fixture
def env(need, request: pytest.FixtureRequest) -> Path:
    """The standalone environment, else the HyperPod one (with the operator's CRDs it needs to render)."""
    need(HYPERPOD is not None or STANDALONE is not None, "no environment in values/")
    if STANDALONE is None:
        request.getfixturevalue("hyperpod_crds")
    return STANDALONE or HYPERPOD  # type: ignore[return-value]


@pytest.fixture
def hp_env(need, hyperpod_crds) -> Path:
    need(HYPERPOD is not None, "no hyperpod environment in values/")
    return HYPERPOD  # type: ignore[return-value]


@pytest.fixture
def ns(make_namespace) -> str:
    return make_namespace("preflight", enforce="privileged")
