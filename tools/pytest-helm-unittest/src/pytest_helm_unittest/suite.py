"""helm-unittest suite files: several suites per file (split on `---`), tests, assertions.

Decoded with yaml.v3 semantics (govalues). Field names follow helm-unittest's YAML keys; suite-level
release/chart/capabilities/values/set/templates are folded into each test as helm-unittest does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_helm_unittest import fakecluster, govalues

_SPLIT = re.compile(r"(?:^|\s*\n)---\s*")
# What the pinned helm-unittest reports as its own version (built from the module proxy without
# ldflags, it keeps its source default); `skip.minimumVersion` is compared with it.
HELM_UNITTEST_BUILD_VERSION = "0.1.0"
_SEMVER = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")


def version_meets(current: str, minimum: str) -> bool:
    """Masterminds semver: current >= minimum; an unparsable version never meets."""
    a, b = _SEMVER.match(current.strip()), _SEMVER.match(minimum.strip())
    if not a or not b:
        return False
    key_a = tuple(int(x or 0) for x in a.groups()[:3])
    key_b = tuple(int(x or 0) for x in b.groups()[:3])
    if key_a != key_b:
        return key_a > key_b
    return not a.group(4) or bool(b.group(4) and a.group(4) >= b.group(4))


class SuiteError(ValueError):
    """The suite file does not parse into suites and tests."""


@dataclass
class Assertion:
    kind: str  # assertion type, e.g. "equal", "notExists"
    params: Any
    negate: bool = False
    template: str = ""
    document_index: int = -1
    selector: dict[str, Any] | None = None


@dataclass
class Job:
    name: str
    values: list[str]
    set: dict[str, Any]
    global_set: dict[str, Any]
    template: str
    templates: list[str]
    document_index: int | None
    selector: dict[str, Any] | None
    release: dict[str, Any]
    chart: dict[str, str]
    capabilities: dict[str, Any]
    asserts: list[Assertion]
    skip_reason: str
    unsupported: list[str] = field(default_factory=list)
    # kubernetesProvider, the test's merged with its suite's (objects and scheme; see fakecluster)
    kubernetes_provider: dict[str, Any] = field(default_factory=dict)


@dataclass
class Suite:
    name: str
    path: Path
    index: int  # position of the suite in its file
    chart_dir: Path  # the chart the suite runs in (the top chart for subchart suites)
    chart_route: str  # e.g. "umbrella" or "umbrella/charts/curvine"
    templates: list[str]
    exclude: list[str]
    snapshot_id: str
    jobs: list[Job]
    skip_reason: str = ""
    include_crds: bool = False


def _assertion(raw: Any, where: str) -> Assertion:
    if not isinstance(raw, dict):
        raise SuiteError(f"{where}: an assertion must be a mapping, got {raw!r}")
    kinds = [k for k in raw if k not in ("not", "template", "documentIndex", "documentSelector")]
    if not kinds:
        raise SuiteError(f"{where}: no assertion type defined")
    if len(kinds) > 1:
        raise SuiteError(f"{where}: assertion type `{kinds[0]}` and `{kinds[1]}` is declared duplicately")
    from pytest_helm_unittest.validators import VALIDATORS

    if kinds[0] not in VALIDATORS:
        raise SuiteError(f"{where}: Assertion type `{kinds[0]}` is invalid")
    selector = raw.get("documentSelector")
    if selector is not None and not isinstance(
        selector.get("path") if isinstance(selector, dict) else None, str
    ):
        raise SuiteError(f"{where}: empty 'documentSelector.path' not supported")
    index = raw.get("documentIndex")
    return Assertion(
        kind=kinds[0],
        params=raw[kinds[0]],
        negate=raw.get("not") is True,
        template=raw["template"] if isinstance(raw.get("template"), str) else "",
        document_index=index if isinstance(index, int) and not isinstance(index, bool) else -1,
        selector=selector,
    )


def _str_list(value: Any) -> list[str]:
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def _job(raw: dict[str, Any], suite: dict[str, Any], where: str) -> Job:
    name = str(raw.get("it", ""))
    asserts = [
        _assertion(a, f"{where} it {name!r} assert #{i}") for i, a in enumerate(raw.get("asserts") or [])
    ]
    if not asserts:
        raise SuiteError(f"{where}: no asserts found in test {name!r}")
    s_rel, t_rel = suite.get("release") or {}, raw.get("release") or {}
    release = {k: t_rel.get(k) or s_rel.get(k) for k in ("name", "namespace", "revision", "upgrade")}
    s_chart, t_chart = suite.get("chart") or {}, raw.get("chart") or {}
    chart = {k: str(t_chart.get(k) or s_chart.get(k) or "") for k in ("version", "appVersion")}
    caps = _capabilities(raw.get("capabilities"), suite.get("capabilities") or {})
    skip = ((suite.get("skip") or {}).get("reason") or (raw.get("skip") or {}).get("reason") or "").strip()
    doc_index = raw.get("documentIndex")
    unsupported = ["postRenderer"] if raw.get("postRenderer") or suite.get("postRenderer") else []
    provider = fakecluster.merged_provider(raw.get("kubernetesProvider"), suite.get("kubernetesProvider"))
    return Job(
        name=name,
        values=_str_list(suite.get("values")) + _str_list(raw.get("values")),
        set=dict(raw.get("set") or {}),
        global_set=dict(suite.get("set") or {}),
        template=str(raw.get("template") or ""),
        templates=_str_list(raw.get("templates")),
        document_index=doc_index if isinstance(doc_index, int) else None,
        selector=raw.get("documentSelector"),
        release=release,
        chart=chart,
        capabilities=caps,
        asserts=asserts,
        skip_reason=skip,
        unsupported=unsupported,
        kubernetes_provider=provider,
    )


def _capabilities(test: Any, suite: dict[str, Any]) -> dict[str, Any]:
    """Test capabilities win per field; suite apiVersions are appended unless the test nulls the key."""
    test = test if isinstance(test, dict) else {}

    def text(v: Any) -> str:
        return v if isinstance(v, str) else str(v) if isinstance(v, int) and not isinstance(v, bool) else ""

    apis: list[str] | None
    if "apiVersions" not in test:
        apis = []
    elif isinstance(test["apiVersions"], list):
        apis = [a for a in test["apiVersions"] if isinstance(a, str)]
    else:  # null or not a list: none, and the suite's are not added (yaml's null leaves Go's nil slice)
        apis = None
    if suite.get("apiVersions") and apis is not None:
        apis = apis + [str(a) for a in suite["apiVersions"]]
    return {
        "majorVersion": text(test.get("majorVersion")) or text(suite.get("majorVersion")),
        "minorVersion": text(test.get("minorVersion")) or text(suite.get("minorVersion")),
        "apiVersions": apis or [],
    }


def parse_file(path: Path, chart_dir: Path, chart_route: str) -> list[Suite]:
    """All suites of one file; raises SuiteError naming the file and the suite for bad content."""
    suites: list[Suite] = []
    parts = [p for p in _SPLIT.split(path.read_text()) if p.strip()]
    for index, part in enumerate(parts):
        where = f"{path} (suite #{index + 1})"
        try:
            raw = govalues.load(part)
        except Exception as err:  # yaml errors carry line/column
            raise SuiteError(f"{where}: invalid YAML: {err}") from None
        if raw is None:
            continue
        if not isinstance(raw, dict):
            raise SuiteError(f"{where}: a suite must be a mapping with `suite` and `tests`")
        tests = raw.get("tests") or []
        if not tests:
            raise SuiteError(f"{where}: no tests found")
        skip = raw.get("skip") or {}
        minimum = str(skip.get("minimumVersion") or "")
        if minimum and not version_meets(HELM_UNITTEST_BUILD_VERSION, minimum):
            raw["skip"] = {
                **skip,
                "reason": f"Test suite requires minimum unittest plugin version {minimum}, "
                f"but current version is {HELM_UNITTEST_BUILD_VERSION}",
            }
        jobs = [_job(t or {}, raw, where) for t in tests]
        suites.append(
            Suite(
                name=str(raw.get("suite") or ""),
                path=path,
                index=index,
                chart_dir=chart_dir,
                chart_route=chart_route,
                templates=_str_list(raw.get("templates")),
                exclude=_str_list(raw.get("excludeTemplates")),
                snapshot_id=str(raw.get("snapshotId") or ""),
                jobs=jobs,
                skip_reason=((raw.get("skip") or {}).get("reason") or "").strip(),
                include_crds=raw.get("includeCrds") is True,
            )
        )
    return suites
