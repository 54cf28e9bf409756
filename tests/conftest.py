"""Marks every test by the folder it lives in (tests/<kind>/ -> pytest marker <kind>), and gives the test run
folders and names of its own."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

import pytest

from kvtier.cluster.common import binaries
from kvtier.validate.options import CLUSTER_ENV

KINDS = ("unit", "charts", "cluster", "node", "engine")

# Tests own their state. The clusters a test starts, the control plane its `kvtier validate` keeps up,
# Helm's config and caches, and the HyperPod SDK's kept verdicts live in folders of the test runs, never in
# the user's: a user's `kvtier validate` or `kvtier cluster up` beside `make test` is neither seen, reused
# nor stopped. Only built binaries and images are shared, through $KVTIER_CACHE.
# $KVTIER_TEST_STATE_DIR moves the test runs' folder (KVTIER_TEST_CLUSTER reuses a named cluster in it).
TEST_STATE = Path(os.environ.get("KVTIER_TEST_STATE_DIR") or binaries.cache_dir() / "test-state")
RUNS = TEST_STATE / "runs"
RUN = RUNS / str(os.getpid())  # this pytest process's own folder, removed when it ends
os.environ[binaries.STATE_ENV] = str(TEST_STATE)
os.environ[CLUSTER_ENV] = f"validate-test-{os.getpid()}"
os.environ["KVTIER_HYPERPOD_VERDICTS"] = str(RUN / "hyperpod-sdk-verdicts")
for _variable, _folder in (
    ("HELM_CONFIG_HOME", "config"),
    ("HELM_CACHE_HOME", "cache"),
    ("HELM_DATA_HOME", "data"),
):
    os.environ[_variable] = str(RUN / "helm" / _folder)


def _remove_finished_runs() -> None:
    """The folders of test runs that ended without their own clean-up (killed), and this run's at its end."""
    for folder in RUNS.iterdir() if RUNS.is_dir() else []:
        if folder.name.isdigit() and (folder == RUN or not Path(f"/proc/{folder.name}").exists()):
            shutil.rmtree(folder, ignore_errors=True)


def pytest_sessionstart(session: pytest.Session) -> None:
    _remove_finished_runs()
    RUN.mkdir(parents=True, exist_ok=True)


def pytest_sessionfinish(session: pytest.Session) -> None:
    _remove_finished_runs()


# Nothing in the tests asks the real Hugging Face Hub: `kvtier validate` reads a model's config.json from the
# Hub where huggingface_hub is online (kvtier.validate.hub_facts), so the session is offline, and its
# subprocesses inherit that; tests that need a Hub lift it for a stand-in on loopback
# (tests/harness/hub_stand_in.py). No telemetry, and no token stored in the user's Hugging Face home is read.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_TOKEN_PATH"] = str(RUN / "hf-token-none")

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
