"""Run one helm-unittest test (`it`): render, select templates and documents, run assertions."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_helm_unittest import chartcopy, fakecluster, govalues, render
from pytest_helm_unittest.request import RenderRequest, RenderResult
from pytest_helm_unittest.snapshot import SnapshotFile
from pytest_helm_unittest.suite import Assertion, Job, Suite
from pytest_helm_unittest.validators import VALIDATORS, Context
from pytest_helm_unittest.values import ValuesError, user_values
from pytest_helm_unittest.yamlpath import PathError, find

# helm-unittest's reduction of a Helm error to (file, message): Go's (?msU) made explicit as lazy.
_ERROR = re.compile(r"^(?:.+?: |.+? \()(?:(.+?):\d+:\d+).+?(?:.+?>)*?: (.+?)$", re.M | re.S)
_SPLIT = re.compile(r"(?:^|\s*\n)---\s*")


@dataclass
class JobResult:
    status: str  # passed | failed | skipped
    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # (index, NOT as printed, kind) of each assertion named failed in `lines`
    failed_asserts: list[tuple[int, bool, str]] = field(default_factory=list)


# Helm's ValidateReleaseName error, for a release name a test sets (helm-unittest checks it itself)
_INVALID_RELEASE_NAME = (
    "invalid release name, must match regex "
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$ and the length must not be "
    "longer than 53"
)


def template_file_name(name: str) -> str:
    return name if name.startswith(("templates", "charts", "crds", "**")) else "templates/" + name


def render_request(suite: Suite, job: Job) -> RenderRequest:
    values = user_values(suite.path, job.values, job.global_set, job.set, suite.chart_route)
    caps = job.capabilities
    return RenderRequest(
        chart_dir=suite.chart_dir,
        target_route=suite.chart_route,
        include=tuple(suite.templates or ["**"]),
        exclude=tuple(suite.exclude),
        overrides=tuple((k, v) for k, v in job.chart.items() if v),
        release_name=str(job.release.get("name") or "RELEASE-NAME"),
        namespace=str(job.release.get("namespace") or "NAMESPACE"),
        revision=int(job.release.get("revision") or 0),
        upgrade=job.release.get("upgrade") is True,
        kube_major=caps["majorVersion"] or render.DEFAULT_KUBE[0],
        kube_minor=caps["minorVersion"] or render.DEFAULT_KUBE[1],
        api_versions=tuple(caps["apiVersions"]),
        values_yaml=render.values_document(values),
        lookup_define=_lookup_define(job),
    )


def _lookup_define(job: Job) -> str:
    """helm-unittest gives `lookup` the fake client only when the test (with its suite) has objects."""
    provider = job.kubernetes_provider
    return fakecluster.define(provider) if provider.get("objects") else ""


def _parse_docs(text: str) -> list[dict[str, Any]]:
    docs = govalues.load_manifests(_SPLIT.sub("\n---\n", text))
    out = []
    for doc in docs:
        if doc is None or doc == {}:
            continue
        if not isinstance(doc, dict):
            raise ValueError(f"a rendered document is not a mapping: {str(doc)[:80]!r}")
        out.append(doc)
    return out


def _manifests(files: dict[str, str], chart: str, succeeded: bool) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for name, text in files.items():
        key = name if name.startswith(chart) else f"{chart}/{name}"
        ext = "." + name.rsplit(".", 1)[-1] if "." in name.rsplit("/", 1)[-1] else ""
        if not succeeded:
            out[key] = [{"raw": text}]
        elif ext in (".yaml", ".yml", ".tpl"):
            out[key] = _parse_docs(text)
        elif ext == ".txt":
            out[key] = [{"raw": text}]
    return out


def _crds(suite: Suite, chart: str, files: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    """`includeCrds`: crds/ files of the chart and of its enabled subcharts at any depth, named as Helm's
    CRDObjects names them. A subchart counts as enabled when some file of it rendered."""
    out: dict[str, list[dict[str, Any]]] = {}

    def visit(chart_dir: Path, route: str) -> None:
        for path in sorted((chart_dir / "crds").rglob("*")) if (chart_dir / "crds").is_dir() else []:
            if path.suffix.lower() in (".yaml", ".yml", ".json"):
                out[f"{route}/{path.relative_to(chart_dir).as_posix()}"] = _parse_docs(path.read_text())
        for sub in sorted((chart_dir / "charts").glob("*/Chart.yaml")):
            sub_route = f"{route}/charts/{chartcopy.chart_name(sub.parent)}"
            if any(name.startswith(sub_route + "/") for name in files):
                visit(sub.parent, sub_route)

    visit(suite.chart_dir, chart)
    return out


def _reduce_error(error: str, suite: Suite) -> tuple[dict[str, str], bool]:
    """helm-unittest's translation of a render error into per-template output ({} if unparsed)."""
    match = _ERROR.search(error)
    if not match:
        return {}, False
    file_path = match.group(1)
    _, _, rest = error.partition("\n")
    content = (rest if rest else match.group(2)).lstrip("\n")
    if file_path.rsplit("/", 1)[-1].startswith("_"):
        names = suite.templates or ["**"]
        return {f"{suite.chart_route}/{template_file_name(n)}": content for n in names}, True
    return {file_path: content}, True


def _select(
    assertion: Assertion, job: Job, docs: dict[str, list[dict[str, Any]] | None]
) -> dict[str, list[Any]]:
    selector = assertion.selector if assertion.selector is not None else job.selector
    if selector and selector.get("path"):
        many, matched = selector.get("matchMany") is True, 0
        out: dict[str, list[Any]] = {}
        for template, manifests in docs.items():
            picked: list[dict[str, Any]] = []
            for doc in manifests or []:
                values = find(doc, selector["path"])
                want = selector.get("value")
                if any(want is None or govalues.go_equal(want, v) for v in values):
                    if not many and picked:
                        raise PathError("multiple indexes found")
                    picked.append(doc)
            matched += len(picked)
            if not many and matched > 1:
                raise PathError("multiple indexes found")
            if picked:
                out[template] = picked
        if matched == 0 and selector.get("skipEmptyTemplates") is not True:
            raise PathError("document not found")
        return out
    index = job.document_index if job.document_index is not None else assertion.document_index
    if index != -1:
        out = {}
        for template, manifests in docs.items():
            if index >= len(manifests or []):
                raise PathError(f"document index {index} is out of range")
            out[template] = [(manifests or [])[index]]
        return out
    return {t: list(m or []) for t, m in docs.items()}


def run_job(suite: Suite, job: Job, renderer: render.Renderer, snapshots: SnapshotFile) -> JobResult:
    if job.skip_reason:
        return JobResult("skipped", [job.skip_reason])
    if job.unsupported:
        return JobResult("failed", [f"not supported by the pytest plugin: {', '.join(job.unsupported)}"])
    try:
        request = render_request(suite, job)
    except ValuesError as err:
        return JobResult("failed", [f"Error: {err}"])
    warnings: list[str] = []
    name = str(job.release.get("name") or "")
    before_render = bool(name) and not render.valid_release_name(name)  # Helm's check, done first
    result = RenderResult({}, _INVALID_RELEASE_NAME) if before_render else renderer.render(request)
    require_success = all(VALIDATORS[a.kind][2] for a in job.asserts)
    chart = chartcopy.chart_name(suite.chart_dir)
    render_error: str | None = None
    exec_error: str | None = None  # a render error no assertion expects: the case's own error
    files, succeeded = result.files, result.error is None
    if result.error is not None and (require_success or before_render):
        # helm-unittest still runs the assertions on no output: they may all be skipped
        exec_error, files = result.error, {}
        render_error = result.error if before_render else None
    elif result.error is not None:
        files, parsed = _reduce_error(result.error, suite)
        if not parsed:
            render_error = result.error
    try:
        crds = _crds(suite, chart, files) if suite.include_crds else {}
        manifests = {**crds, **_manifests(files, chart, succeeded)}
    except Exception as err:
        return JobResult("failed", [f"Error: {err}"])
    counter = {"n": 0}

    def compare(content: Any, match: str = "", not_match: str = "") -> Any:
        counter["n"] += 1
        return snapshots.compare(job.name, counter["n"], content, match, not_match)

    defaults = suite.templates or ["**"]
    passed_all, lines, skipped = True, [], 0
    failed: list[tuple[int, bool, str]] = []
    for n, assertion in enumerate(job.asserts):
        validator, antonym, requires = VALIDATORS[assertion.kind]
        if assertion.template:
            names = [assertion.template]
        elif job.templates:
            names = job.templates
        elif job.template:
            names = [job.template]
        elif any("*" in d for d in defaults):
            names = list(files) + list(crds)
        else:
            names = defaults
        if assertion.template or job.templates or job.template or not any("*" in d for d in defaults):
            names = [f"{suite.chart_route}/{template_file_name(t)}" for t in names]
        docs = {t: manifests.get(t) for t in names}
        try:
            selected = _select(assertion, job, docs)
        except PathError as err:
            passed_all = False
            lines += [
                f"- asserts[{n}]{' NOT' if assertion.negate else ''} `{assertion.kind}` fail",
                "Error:",
                f"\t{err}",
            ]
            failed.append((n, assertion.negate, assertion.kind))
            continue
        skip_empty = bool(job.selector and job.selector.get("skipEmptyTemplates") is True)
        negative = assertion.negate != antonym
        ok, fail_lines = True, []
        if skip_empty and not selected:
            # helm-unittest's runAssertions sets the case's verdict back to passed at a skipped
            # assertion, so only failures after the last skip count
            passed_all, skipped = True, skipped + 1
            continue
        if not selected:
            if requires != succeeded:
                ok, fail_lines = False, ["Error: rendered manifest is empty"]
            else:
                ok, fail_lines = validator(assertion.params, Context([], [], negative, compare, render_error))
        for template in sorted(selected):
            rendered = manifests.get(template)
            if rendered is None and requires:
                t_ok, t_lines = (
                    False,
                    [f'Error:\ttemplate "{template}" not exists or not selected in test suite'],
                )
            elif requires != succeeded:
                raw = rendered[0].get("raw") if rendered else None
                t_ok = False
                t_lines = [
                    f"Template:\t{template}",
                    f"Error: Invalid rendering: {raw}" if rendered else "Error: rendered manifest is empty",
                ]
            else:
                ctx = Context(rendered or [], selected[template], negative, compare, render_error)
                t_ok, t_lines = validator(assertion.params, ctx)
                if not t_ok:
                    t_lines = [f"Template:\t{template}", *t_lines]
            ok, fail_lines = ok and t_ok, fail_lines + t_lines
        if not ok:
            passed_all = False
            lines += [
                f"- asserts[{n}]{' NOT' if assertion.negate else ''} `{assertion.kind}` fail",
                *fail_lines,
            ]
            failed.append((n, assertion.negate, assertion.kind))
    if skipped == len(job.asserts):
        # helm-unittest counts such a case passed (its summary, exit code and console; only its JUnit
        # report marks it skipped), so the item passes and a warning says that nothing was checked
        warnings.append("every assertion was skipped (documentSelector.skipEmptyTemplates found no "
                        "document): helm-unittest counts the case passed")  # fmt: skip
        return JobResult("passed", [], warnings)
    if exec_error is not None and not passed_all:
        return JobResult("failed", ["Error: " + exec_error], warnings)  # reported without assertions
    if passed_all:
        if failed:  # passed with failures: all came before a skipped assertion, say what that hides
            hidden = ", ".join(f"asserts[{i}]" for i, _, _ in failed)
            warnings.append(f"{hidden} failed but helm-unittest passes the case: a later assertion is "
                            "skipped (documentSelector.skipEmptyTemplates)")  # fmt: skip
        return JobResult("passed", [], warnings)
    return JobResult("failed", lines, warnings, failed)
