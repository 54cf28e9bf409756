"""Marks every test by the folder it lives in: tests/<kind>/ -> pytest marker <kind>."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

KINDS = ("unit", "charts", "cluster", "node", "engine")

# `kvtier validate` dry-runs on a local control plane by default, and leaves it up for the next run. A test
# that runs the command gets it offline unless it asks for the server: the default itself is tested in
# tests/cluster/test_validate_default_judges.py, which lifts this.
os.environ.setdefault("KVTIER_VALIDATE_OFFLINE", "1")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests_dir = Path(__file__).parent
    for item in items:
        try:
            kind = Path(item.fspath).relative_to(tests_dir).parts[0]
        except ValueError:
            continue
        if kind in KINDS:
            item.add_marker(getattr(pytest.mark, kind))


_seconds_per_module: Counter[str] = Counter()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _seconds_per_module[report.nodeid.split("::")[0]] += report.duration


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """With --durations, also each module's total (set-up, call and tear-down): what CI's budget is
    spent on, fixtures that build images or start clusters included."""
    if config.option.durations is None or not _seconds_per_module:
        return
    terminalreporter.write_sep("=", "seconds per test module")
    for module, seconds in _seconds_per_module.most_common():
        terminalreporter.write_line(f"{seconds:9.1f}  {module}")


def _need(condition: bool, why: str) -> None:
    """Skip when a prerequisite is missing, except under CI, where a missing kind must fail loudly."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(f"prerequisite missing in CI: {why}", pytrace=False)
    pytest.skip(why)


@pytest.fixture(scope="session")
def need():
    """`need(condition, why)`: a prerequisite (a built tool, a running cluster) of a test or of a
    session-wide fixture such as the cluster's."""
    return _need


@pytest.fixture(scope="session")
def hyperpod_sdk_ready(need) -> None:
    """AWS's HyperPod SDK in its venv (`make hyperpod-sdk`): what the HyperPod tests validate with."""
    from kvtier.upstream import hyperpod_sdk

    need(not hyperpod_sdk.missing(), hyperpod_sdk.missing())


@pytest.fixture(scope="session")
def hyperpod_crd_dir(hyperpod_sdk_ready, tmp_path_factory) -> Path:
    """The operator's CRDs (newest operator version) derived from the SDK into a temporary folder."""
    from kvtier.upstream import hyperpod_crd

    folder = tmp_path_factory.mktemp("hyperpod-crds")
    hyperpod_crd.write(folder)
    return folder
