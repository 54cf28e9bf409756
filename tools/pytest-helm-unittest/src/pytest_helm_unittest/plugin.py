"""pytest plugin: run helm-unittest suites (`charts/*/tests/*_test.yaml`) as pytest items.

Inactive unless chart roots are configured (`--helm-unittest-root` or ini `helm_unittest_roots`), so
the project's own `pytest tests` never collects chart suites by accident. One item per `it`, named
`<chart>::<suite>::<it>`; -k/-m selection, skips and reporting are pytest's own.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_helm_unittest import chartcopy, job, render
from pytest_helm_unittest.request import RenderRequest
from pytest_helm_unittest.snapshot import SnapshotFile
from pytest_helm_unittest.suite import Job, Suite, SuiteError, parse_file
from pytest_helm_unittest.validators import VALIDATORS
from pytest_helm_unittest.values import ValuesError

_STATE = pytest.StashKey[dict[str, Any]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("helm-unittest", "helm-unittest suites as pytest items")
    group.addoption(
        "--helm-unittest-root",
        action="append",
        default=[],
        metavar="CHART_DIR",
        help="chart directory whose suites to run (repeatable); enables the plugin",
    )
    group.addoption(
        "--helm-unittest-pattern",
        default=None,
        metavar="GLOB",
        help="suite files relative to each chart (default: tests/*_test.yaml)",
    )
    group.addoption(
        "--update-snapshots",
        action="store_true",
        default=False,
        help="rewrite __snapshot__/*.snap files with the current output",
    )
    group.addoption(
        "--helm-unittest-report",
        default=None,
        metavar="FILE",
        help="write every case's verdict as JSON (chart route, suite file, suite, it, outcome)",
    )
    group.addoption(
        "--helm-unittest-no-batch",
        action="store_true",
        default=False,
        help="one `helm template` run per distinct test input (no batching of tests that share a chart)",
    )
    group.addoption(
        "--helm-unittest-helm",
        default=None,
        metavar="PATH",
        help="Helm 3 binary to render with (default: ini helm_unittest_helm, else `helm` on PATH)",
    )
    parser.addini("helm_unittest_roots", "chart directories whose suites to run", type="linelist", default=[])
    parser.addini("helm_unittest_pattern", "suite file glob relative to a chart", default="tests/*_test.yaml")
    parser.addini("helm_unittest_helm", "Helm 3 binary, relative to the rootdir or on PATH", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "helm_unittest: a helm-unittest test case (one `it` of a chart suite)")
    cli_roots = config.getoption("--helm-unittest-root")
    if cli_roots:
        roots = [Path(r).resolve() for r in cli_roots]
    else:  # ini entries are relative to the ini file's directory
        roots = [(config.rootpath / r).resolve() for r in config.getini("helm_unittest_roots")]
    pattern = config.getoption("--helm-unittest-pattern") or config.getini("helm_unittest_pattern")
    config.stash[_STATE] = {
        "roots": roots,
        "pattern": pattern,
        "snapshots": {},
        "ran": {},
        "renderer": None,
        "last": {},
    }
    if cli_roots and config.args_source == pytest.Config.ArgsSource.TESTPATHS:
        config.args[:] = [str(r) for r in roots]  # the roots alone, not the project's testpaths
    elif roots:
        missing = [
            str(r) for r in roots if not any(Path(a).resolve() in (r, *r.parents) for a in config.args)
        ]
        config.args.extend(missing)


def _route_for(path: Path, state: dict[str, Any]) -> tuple[Path, str] | None:
    """(top chart dir, chart route) when path is a suite file of a configured chart or its subchart."""
    for root in state["roots"]:
        try:
            rel = path.relative_to(root)
        except ValueError:
            continue
        if fnmatch.fnmatch(rel.as_posix(), state["pattern"]):
            return root, chartcopy.chart_name(root)
        parts = rel.parts
        if len(parts) > 2 and parts[0] == "charts" and (root / "charts" / parts[1] / "Chart.yaml").is_file():
            sub = root / "charts" / parts[1]
            if fnmatch.fnmatch(path.relative_to(sub).as_posix(), state["pattern"]):
                return root, f"{chartcopy.chart_name(root)}/charts/{chartcopy.chart_name(sub)}"
    return None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    state = parent.config.stash[_STATE]
    if not state["roots"] or file_path.suffix not in (".yaml", ".yml"):
        return None
    found = _route_for(file_path.resolve(), state)
    if found is None:
        return None
    return SuiteFile.from_parent(parent, path=file_path, chart_dir=found[0], chart_route=found[1])


class SuiteFile(pytest.File):
    def __init__(self, *, chart_dir: Path, chart_route: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.chart_dir, self.chart_route = chart_dir, chart_route

    def collect(self) -> Iterator[pytest.Item]:
        try:
            suites = parse_file(self.path, self.chart_dir, self.chart_route)
        except SuiteError as err:
            raise self.CollectError(str(err)) from None
        chart = self.chart_route.rsplit("/", 1)[-1]
        seen: dict[str, int] = {}
        for suite in suites:
            for test in suite.jobs:
                name = f"{chart}::{suite.name}::{test.name}"
                seen[name] = seen.get(name, 0) + 1
                item = HelmUnitItem.from_parent(
                    self, name=name if seen[name] == 1 else f"{name}[{seen[name]}]", suite=suite, job=test
                )
                item.add_marker(pytest.mark.helm_unittest)
                if test.skip_reason:
                    item.add_marker(pytest.mark.skip(reason=test.skip_reason))
                yield item


class HelmUnitFailure(Exception):
    """A test case whose assertions failed; carries helm-unittest-style failure lines."""


class HelmUnitItem(pytest.Item):
    def __init__(self, *, suite: Suite, job: Job, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suite, self.job = suite, job
        self.failed_asserts: list[tuple[int, bool, str]] = []

    def runtest(self) -> None:
        state = self.config.stash[_STATE]
        try:
            result = job.run_job(self.suite, self.job, _renderer(self.config), _snapshots(state, self))
            self.failed_asserts = result.failed_asserts
        finally:
            state["ran"].setdefault(_suite_key(self.suite), set()).add(self.job.name)
            _store_if_last(state, self)
        for warning in result.warnings:
            self.warn(pytest.PytestWarning(f"{self.job.name}: {warning}"))
        if result.status == "skipped":
            pytest.skip("; ".join(result.lines))
        if result.status == "failed":
            raise HelmUnitFailure("\n".join(result.lines))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, HelmUnitFailure):
            where = f"{self.path}: suite {self.suite.name!r}, test {self.job.name!r}"
            return f"{where}\n{excinfo.value}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"{self.suite.chart_route}: {self.suite.name} :: {self.job.name}"


def _suite_key(suite: Suite) -> tuple[str, int]:
    return (str(suite.path), suite.index)


def _snapshots(state: dict[str, Any], item: HelmUnitItem) -> SnapshotFile:
    """The suite's snapshot cache, read when its first case runs (after the previous suite stored)."""
    key = _suite_key(item.suite)
    if key not in state["snapshots"]:
        update = item.config.getoption("--update-snapshots")
        state["snapshots"][key] = SnapshotFile.for_suite(item.suite.path, item.suite.snapshot_id, update)
    return state["snapshots"][key]


def _store_if_last(state: dict[str, Any], item: HelmUnitItem) -> None:
    """Like helm-unittest, each suite stores its snapshot file when it is done; suites of one file
    share the file, so the next suite reads what this one wrote."""
    key = _suite_key(item.suite)
    if state["last"].get(key) != item.nodeid or key not in state["snapshots"]:
        return
    complete = state["ran"].get(key, set()) >= {j.name for j in item.suite.jobs}
    state["snapshots"].pop(key).store(complete=complete)


def _helm(config: pytest.Config) -> Path:
    """The Helm 3 binary: --helm-unittest-helm, else ini helm_unittest_helm (a path relative to the
    rootdir, or a name on PATH), else `helm` on PATH; a usage error naming what was looked for."""
    wanted = config.getoption("--helm-unittest-helm") or config.getini("helm_unittest_helm") or "helm"
    relative = config.rootpath / wanted
    found = str(relative) if "/" in wanted and relative.is_file() else shutil.which(wanted)
    if not found:
        raise pytest.UsageError(
            f"helm-unittest plugin: no Helm 3 binary at {wanted!r}; pass --helm-unittest-helm PATH "
            "or set the ini option helm_unittest_helm"
        )
    return Path(found)


def _renderer(config: pytest.Config) -> render.Renderer:
    state = config.stash[_STATE]
    if state["renderer"] is None:
        state["renderer"] = render.Renderer(
            _helm(config), Path(tempfile.mkdtemp(prefix="pytest-helm-unittest-"))
        )
    return state["renderer"]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Render every distinct request up front, in parallel: helm runs dominate the run time."""
    state = session.config.stash[_STATE]
    for item in session.items:
        if isinstance(item, HelmUnitItem):
            state["last"][_suite_key(item.suite)] = item.nodeid
    items = [i for i in session.items if isinstance(i, HelmUnitItem) and not i.job.skip_reason]
    if not items or session.config.option.collectonly:
        return
    renderer = _renderer(session.config)
    requests: set[RenderRequest] = set()
    singles: set[RenderRequest] = set()  # expected to fail: Helm's own error text is needed
    for item in items:
        try:
            request = job.render_request(item.suite, item.job)
        except ValuesError:
            continue  # reported by the item itself
        requests.add(request)
        if not all(VALIDATORS[a.kind][2] for a in item.job.asserts):
            singles.add(request)
    if session.config.getoption("--helm-unittest-no-batch"):
        singles = set(requests)
    renderer.prefetch(requests, singles, workers=os.cpu_count() or 1)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Remember each case's verdict (a failure in any phase wins over a pass)."""
    verdicts = _REPORTED.get(report.nodeid)
    if report.outcome == "failed" or verdicts is None or (report.when == "call" and verdicts == "passed"):
        _REPORTED[report.nodeid] = report.outcome


_REPORTED: dict[str, str] = {}


def _write_report(session: pytest.Session, target: str) -> None:
    rows = []
    for item in session.items:
        if isinstance(item, HelmUnitItem):
            rows.append(
                {
                    "chart": item.suite.chart_route,
                    "file": str(item.suite.path),
                    "suite": item.suite.name,
                    "it": item.job.name,
                    "outcome": _REPORTED.get(item.nodeid, "not run"),
                    "failed_asserts": [
                        {"index": n, "not": negate, "kind": kind} for n, negate, kind in item.failed_asserts
                    ],
                }
            )
    Path(target).write_text(json.dumps(rows, indent=1) + "\n")


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(_STATE, None)
    if not state:
        return
    report = session.config.getoption("--helm-unittest-report")
    if report:
        _write_report(session, report)
    for snap in state["snapshots"].values():  # suites cut short (e.g. -x): keep what they produced
        snap.store(complete=False)
    if state["renderer"] is not None:
        shutil.rmtree(state["renderer"].workdir, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """helm-unittest keeps the last Kubernetes version a test set as the default for later tests
    (its Helm capabilities are a shared global); replay that over the full run, in file order."""
    major, minor = render.DEFAULT_KUBE
    for item in items:
        if not isinstance(item, HelmUnitItem) or item.job.skip_reason:
            continue
        caps = item.job.capabilities
        major, minor = caps["majorVersion"] or major, caps["minorVersion"] or minor
        caps["majorVersion"], caps["minorVersion"] = major, minor


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    renderer = state["renderer"] if state else None
    if renderer is not None:
        line = f"helm-unittest plugin: {renderer.runs} helm template runs"
        if renderer.batch_rejects:
            line += f", {renderer.batch_rejects} batch(es) rendered one by one after a failed self-check"
        terminalreporter.write_line(line)
