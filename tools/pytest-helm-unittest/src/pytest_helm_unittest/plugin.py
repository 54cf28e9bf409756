"""pytest plugin: run helm-unittest suites (`charts/*/tests/*_test.yaml`) as pytest items.

Inactive unless chart roots are configured (`--helm-unittest-root` or ini `helm_unittest_roots`), so
the project's own `pytest tests` never collects chart suites by accident. One item per `it`, named
`<chart>::<suite>::<it>`; -k/-m selection, skips and reporting are pytest's own.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_helm_unittest import collect, job, render
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
        action="append",
        default=[],
        metavar="GLOB",
        help="suite files relative to each chart, as helm-unittest's -f (repeatable; default: "
        "tests/*_test.yaml)",
    )
    group.addoption(
        "--helm-unittest-no-subchart",
        action="store_true",
        default=False,
        help="leave out the suites of subcharts (helm-unittest's --with-subchart=false)",
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
    parser.addini(
        "helm_unittest_pattern", "suite file globs relative to a chart", type="linelist", default=[]
    )
    parser.addini("helm_unittest_helm", "Helm 3 binary, relative to the rootdir or on PATH", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "helm_unittest: a helm-unittest test case (one `it` of a chart suite)")
    cli_roots = config.getoption("--helm-unittest-root")
    if cli_roots:
        roots = [Path(r).resolve() for r in cli_roots]
    else:  # ini entries are relative to the ini file's directory
        roots = [(config.rootpath / r).resolve() for r in config.getini("helm_unittest_roots")]
    patterns = config.getoption("--helm-unittest-pattern") or config.getini("helm_unittest_pattern")
    plans = _plans(
        roots, patterns or [collect.DEFAULT_PATTERN], config.getoption("--helm-unittest-no-subchart")
    )
    config.stash[_STATE] = {
        "roots": roots,
        "plans": plans,
        "parsed": {},
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
    outside = [p for p in plans if p.is_file() and not any(r in p.parents for r in roots)]
    config.args.extend(str(p) for p in outside)  # suites a pattern finds outside every chart


@dataclass(frozen=True)
class _Planned:
    root: Path
    route: str
    top: bool
    rank: tuple[int, int]  # (root, position in helm-unittest's order)


def _plans(roots: list[Path], patterns: list[str], no_subchart: bool) -> dict[Path, list[_Planned]]:
    """Every suite file helm-unittest would open for the roots, by resolved path."""
    plans: dict[Path, list[_Planned]] = {}
    for root_index, root in enumerate(roots):
        if not (root / "Chart.yaml").is_file():
            continue
        try:
            planned = collect.suite_plan(root, patterns, with_subchart=not no_subchart)
        except collect.PatternError as err:
            raise pytest.UsageError(
                f"helm-unittest plugin: bad suite pattern {err} (Go filepath.Match syntax)"
            ) from None
        for position, entry in enumerate(planned):
            where = _Planned(root, entry.chart_route, entry.top, (root_index, position))
            plans.setdefault(entry.path.resolve(), []).append(where)
    return plans


def _parsed(state: dict[str, Any], path: Path, where: _Planned) -> list[Suite] | SuiteError:
    key = (path, where.route)
    if key not in state["parsed"]:
        try:
            state["parsed"][key] = parse_file(path, where.root, where.route)
        except (SuiteError, OSError, UnicodeDecodeError) as err:
            state["parsed"][key] = err if isinstance(err, SuiteError) else SuiteError(f"{path}: {err}")
    result: list[Suite] | SuiteError = state["parsed"][key]
    return result


def _first_error(
    state: dict[str, Any], root: Path, routes: set[str] | None
) -> tuple[Path, SuiteError] | None:
    """The first planned file of the root that fails to parse, among the top chart's files (routes
    None) or those of the given subchart routes."""
    for path, entries in state["plans"].items():
        for entry in entries:
            if entry.root != root or not (entry.top if routes is None else entry.route in routes):
                continue
            result = _parsed(state, path, entry)
            if isinstance(result, SuiteError):
                return path, result
    return None


def _subchart_chain(route: str) -> set[str]:
    """A subchart's route and those of the subcharts above it, not the top chart's."""
    parts = route.split("/charts/")
    return {"/charts/".join(parts[:n]) for n in range(2, len(parts) + 1)}


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Visit what helm-unittest selects even where pytest's norecursedirs would not look."""
    state = config.stash.get(_STATE, None)
    if not state or not state["plans"]:
        return None
    path = collection_path.resolve()
    if path in state["plans"] or any(path in p.parents for p in state["plans"]):
        return False
    return None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    state = parent.config.stash[_STATE]
    entries = state["plans"].get(file_path.resolve()) if state["roots"] else None
    if not entries:
        return None
    return SuiteFile.from_parent(parent, path=file_path, planned=entries)


class SuiteFile(pytest.File):
    """One suite file; helm-unittest runs it once per time its patterns select it."""

    def __init__(self, *, planned: list[_Planned], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.planned = planned

    def collect(self) -> Iterator[pytest.Item]:
        state = self.config.stash[_STATE]
        seen: dict[str, int] = {}
        for where in self.planned:
            # helm-unittest runs no suite of a chart one of whose top files fails to parse, and none of
            # a subchart (or below it) one of whose files does.
            broken = _first_error(state, where.root, None)
            if broken and where.top and broken[0] == self.path.resolve():
                raise self.CollectError(str(broken[1]))
            if broken:
                continue  # reported once, by the broken file
            broken = _first_error(state, where.root, _subchart_chain(where.route))
            if broken:
                message = f"suites of {where.route} left out, as helm-unittest does: {broken[1]}"
                self.warn(pytest.PytestWarning(message))
                continue
            suites = _parsed(state, self.path.resolve(), where)
            assert not isinstance(suites, SuiteError)
            chart = where.route.rsplit("/", 1)[-1]
            for suite in suites:
                for job_index, test in enumerate(suite.jobs):
                    name = f"{chart}::{suite.name}::{test.name}"
                    seen[name] = seen.get(name, 0) + 1
                    item = HelmUnitItem.from_parent(
                        self,
                        name=name if seen[name] == 1 else f"{name}[{seen[name]}]",
                        suite=suite,
                        job=test,
                        rank=(*where.rank, suite.index, job_index),
                    )
                    item.add_marker(pytest.mark.helm_unittest)
                    if test.skip_reason:
                        item.add_marker(pytest.mark.skip(reason=test.skip_reason))
                    yield item


class HelmUnitFailure(Exception):
    """A test case whose assertions failed; carries helm-unittest-style failure lines."""


class HelmUnitItem(pytest.Item):
    def __init__(self, *, suite: Suite, job: Job, rank: tuple[int, ...], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suite, self.job, self.rank = suite, job, rank
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
    """Run the cases in helm-unittest's order (pytest's walk puts charts/ before tests/), then replay
    how it keeps the last Kubernetes version a test set as the default for later tests (its Helm
    capabilities are a shared global)."""
    slots = [i for i, item in enumerate(items) if isinstance(item, HelmUnitItem)]
    cases = [item for item in items if isinstance(item, HelmUnitItem)]
    for slot, case in zip(slots, sorted(cases, key=lambda case: case.rank), strict=True):
        items[slot] = case
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
        if renderer.prefetch_failures:
            line += f", {renderer.prefetch_failures} up-front render(s) failed and were redone case by case"
        terminalreporter.write_line(line)
