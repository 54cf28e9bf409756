"""Pure parts of the helm-unittest plugin: yaml.v3 value rules, the yaml.v3 writer, paths, values,
set paths, error reduction, template globs and snapshot files. Expected outputs are what
the pinned helm-unittest (go.yaml.in/yaml/v3 v3.0.4) does, as observed in its source and output."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from pytest_helm_unittest import chartcopy, goemit, govalues, job, values
from pytest_helm_unittest.snapshot import SnapshotFile
from pytest_helm_unittest.yamlpath import PathError, find


@pytest.mark.parametrize(
    ("text", "expected", "type_name"),
    [
        ("yes", "yes", "string"),
        ("True", True, "bool"),
        ("0777", 511, "int"),
        ("1_000", 1000, "int"),
        ("0x1F", 31, "int"),
        ("08", 8.0, "float64"),
        ("1.0", 1.0, "float64"),
        (".5", 0.5, "float64"),
        ("~", None, ""),
        ("2024-01-01", "2024-01-01T00:00:00Z", "time.Time"),
        ('"2024-01-01"', "2024-01-01", "string"),
        ("9223372036854775808", 9223372036854775808, "uint64"),
    ],
)
def test_plain_scalars_resolve_like_yaml_v3(text: str, expected: object, type_name: str) -> None:
    value = govalues.load(f"v: {text}")["v"]
    assert value == expected and govalues.go_type_name(value) == type_name


def test_go_equality_keeps_types_apart() -> None:
    assert govalues.go_equal({"a": [1, "x"]}, {"a": [1, "x"]})
    assert not govalues.go_equal(1, 1.0)
    assert not govalues.go_equal(True, 1)
    assert not govalues.go_equal("2024-01-01", govalues.load("v: 2024-01-01")["v"])


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.0, "1"), (1e6, "1e+06"), (1234567.0, "1.234567e+06"), (123456.0, "123456"), (1e-05, "1e-05"),
     (0.0001, "0.0001"), (-2.25, "-2.25"), (math.inf, ".inf")],
)  # fmt: skip
def test_floats_are_written_like_go(value: float, text: str) -> None:
    assert govalues.go_format_float(value) == text


def test_writer_matches_yaml_v3_choices() -> None:
    doc = {
        "b": [
            {"x.json": "\n{}\n"},
            {"k": "a: b", "e": "", "y": "yes", "n": "1.0", "t": "a\tb", "m": "l1\nl2"},
        ],
        "a": {},
        "item10": 1,
        "item9": [],
    }
    assert goemit.trusted_dump(doc) == (
        "a: {}\n"
        "b:\n"
        "  - x.json: |\n"
        "      {}\n"
        '  - e: ""\n'
        "    k: 'a: b'\n"
        "    m: |-\n"
        "      l1\n"
        "      l2\n"
        '    "n": "1.0"\n'
        '    t: "a\\tb"\n'
        '    "y": "yes"\n'
        "item9: []\n"
        "item10: 1\n"
    )
    assert goemit.dump("some\ntext") == "|-\n  some\n  text\n"


MANIFEST = {
    "metadata": {"name": "x", "labels": {"app.kubernetes.io/name": "a"}},
    "spec": {
        "whole": 1.0,
        "containers": [{"name": "app", "ports": [{"containerPort": 80}]}, {"name": "side", "image": "b"}],
    },
}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("metadata.name", ["x"]),
        ('metadata.labels["app.kubernetes.io/name"]', ["a"]),
        ("metadata.labels['app.kubernetes.io/name']", ["a"]),
        ("spec.containers[-1].name", ["side"]),
        ("spec.containers[*].name", ["app", "side"]),
        ("spec.containers[0:1].name", ["app"]),
        ('spec.containers[?(@.name == "side")].image', ["b"]),
        ("spec.containers[?(@.ports[0].containerPort >= 80)].name", ["app"]),
        ("spec.containers[?(!@.ports)].name", ["side"]),
        ("spec.containers[?(@.name =~ /^si/)].name", ["side"]),
        ("..image", ["b"]),
        ("$.metadata.name", ["x"]),
        ("spec.whole", [1]),  # a float with an integral value comes back as an int, as in Go
        ("spec.nothing", []),
    ],
)
def test_paths(path: str, expected: list[object]) -> None:
    found = find(MANIFEST, path)
    assert found == expected and [type(v) for v in found] == [type(v) for v in expected]


def test_bad_path_is_an_error() -> None:
    with pytest.raises(PathError):
        find(MANIFEST, "spec.containers[x]")


def test_values_merge_order_and_scoping(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("replicas: 1\nimage: {tag: a, repo: r}\nlist: [1, 2]\n")
    (tmp_path / "b.yaml").write_text("image: {tag: b}\nlist: [3]\n")
    merged = values.user_values(
        tmp_path / "s_test.yaml",
        ["a.yaml", "b.yaml"],
        {"replicas": 2, "image.tag": "c"},
        {"replicas": 3},
        "top",
    )
    assert merged == {"replicas": 3, "image": {"tag": "c", "repo": "r"}, "list": [3]}
    scoped = values.user_values(
        tmp_path / "s_test.yaml", [], {}, {"size": 1, "global.r": "eu"}, "top/charts/sub"
    )
    assert scoped == {"global": {"r": "eu"}, "sub": {"size": 1, "global": {"r": "eu"}}}


def test_set_paths() -> None:
    assert values.set_path("a.b[1].c", 5) == {"a": {"b": [None, {"c": 5}]}}
    assert values.set_path("labels.[app.kubernetes.io/name]", "x") == {
        "labels": {"app.kubernetes.io/name": "x"}
    }
    with pytest.raises(values.ValuesError):
        values.set_path("a.b=c", 1)


def test_template_globs_are_unanchored_like_helm_unittest() -> None:
    pattern = chartcopy.template_pattern("top", "*.yaml")
    assert pattern.search("top/templates/svc.yaml") and pattern.search("top/templates/tests/pod.yaml")
    assert not chartcopy.template_pattern("top", "svc.yaml").search("top/templates/headless-svc.yaml")


def test_render_errors_are_reduced_like_helm_unittest() -> None:
    suite = SimpleNamespace(templates=[], chart_route="top")
    files, parsed = job._reduce_error("execution error at (top/templates/a.yaml:3:4): boom", suite)  # type: ignore[arg-type]
    assert parsed and files == {"top/templates/a.yaml": "boom"}
    files, _ = job._reduce_error("execution error at (top/templates/a.yaml:1:3): line1\nline2", suite)  # type: ignore[arg-type]
    assert files == {"top/templates/a.yaml": "line2"}
    files, _ = job._reduce_error("execution error at (top/templates/_h.tpl:1:3): helper", suite)  # type: ignore[arg-type]
    assert files == {"top/**": "helper"}
    assert job._reduce_error("values don't meet the specifications of the schema(s)", suite) == (
        {},
        False,
    )  # type: ignore[arg-type]


def test_snapshot_file_round_trip(tmp_path: Path) -> None:
    suite_file = tmp_path / "x_test.yaml"
    first = SnapshotFile.for_suite(suite_file, "", update=False)
    assert first.compare("it works", 1, {"a": 1}).passed  # a new snapshot passes and is stored
    first.store(complete=True)
    assert (tmp_path / "__snapshot__" / "x_test.yaml.snap").read_text() == "it works:\n  1: |\n    a: 1\n"
    second = SnapshotFile.for_suite(suite_file, "", update=False)
    assert second.compare("it works", 1, {"a": 1}).passed
    assert not second.compare("it works", 1, {"a": 2}).passed
    assert SnapshotFile.for_suite(suite_file, "", update=True).compare("it works", 1, {"a": 2}).passed


def test_corpus_covers_every_assertion_type_plain_and_negated() -> None:
    from pytest_helm_unittest.suite import parse_file
    from pytest_helm_unittest.validators import VALIDATORS

    corpus = Path(__file__).resolve().parents[1] / "unittest_corpus" / "corpus"
    forms = set()
    for path in corpus.rglob("*_test.yaml"):
        for suite in parse_file(path, corpus, "corpus"):
            forms |= {(a.kind, a.negate) for job in suite.jobs for a in job.asserts}
    missing = {(kind, negate) for kind in VALIDATORS for negate in (False, True)} - forms
    assert not missing, f"corpus lacks these (assertion type, not) forms: {sorted(missing)}"


def test_junit_failure_text_names_only_the_assertions_that_failed() -> None:
    """helm-unittest's JUnit text lists a header for every assertion of a failed case; the failed ones
    are those followed by their details (as on its console)."""
    from kvtier.unittest_compare import junit_failed_asserts

    text = (
        " - asserts[0] `exists` fail , - asserts[1] `notExists` fail , - asserts[2] `isNull` fail , "
        "Template:corpus/templates/deployment.yaml , DocumentIndex:0 , "
        "Path:spec.nothing expected to NOT exists , "
        "- asserts[3] `isNotNull` fail , - asserts[4] NOT `exists` fail ,"
    )
    assert junit_failed_asserts(text) == ((2, False, "isNull"),)
    negated = " - asserts[0] NOT `equal` fail , Template:t.yaml , Path:a , Expected NOT to equal: , 1 ,"
    assert junit_failed_asserts(negated) == ((0, True, "equal"),)


def test_junit_skips_that_ran_assertions_read_as_passed(tmp_path: Path) -> None:
    """The pinned helm-unittest counts a case whose assertions documentSelector.skipEmptyTemplates all
    skipped as passed (summary, exit code), but its JUnit report marks it skipped; a `skip:` case lists
    no assertion. Messages as the pinned binary writes them."""
    from kvtier.unittest_reference import junit_cases

    reason = "skipped as 'documentSelector.skipEmptyTemplates: true' and 'selectedTemplates: empty'"
    ran = f"SKIPPED 'all skipped' , - asserts[0] `exists` fail , {reason} ,"
    ran_after_error = f"SKIPPED 'after error' ,execution error at (c/templates/f.yaml:5:4): boom, - asserts[0] NOT `equal` fail , {reason} ,"  # noqa: E501
    report = tmp_path / "report.xml"
    report.write_text(
        '<testsuites><testsuite name="s">'
        f'<testcase name="all skipped"><skipped message="{ran}"></skipped></testcase>'
        f'<testcase name="after error"><skipped message="{ran_after_error}"></skipped></testcase>'
        '<testcase name="by reason"><skipped message="SKIPPED \'by reason\' ,"></skipped></testcase>'
        '<testcase name="- asserts[0] `x` in a name">'
        "<skipped message=\"SKIPPED '- asserts[0] `x` in a name' ,\"></skipped></testcase>"
        "</testsuite></testsuites>"
    )
    assert [(case, verdict) for _, case, verdict, _ in junit_cases(report)] == [
        ("all skipped", "passed"),
        ("after error", "passed"),
        ("by reason", "skipped"),
        ("- asserts[0] `x` in a name", "skipped"),
    ]


@pytest.mark.parametrize(
    ("version", "accepted"),
    [("1.2.3", True), ("v1.2", True), ("1.2.3-rc.1+b.5", True), ("1", True), ("not-semver", False),
     ("1.2.3.4", False), ("1.2.3-01", False), ("01.2.3", False), ("", False)],
)  # fmt: skip
def test_a_chart_version_helm_refuses_is_shown_through_the_probe(version: str, accepted: bool) -> None:
    """A `chart.version` Helm's chart loader would refuse goes into Chart.yaml as a stand-in; the probe
    then passes templates a .Chart that shows the given version (helm-unittest sets it unchecked)."""
    assert chartcopy.helm_loads_version(version) is accepted
    expr = chartcopy.chart_expr("not-semver")
    assert expr.startswith("(dict ") and '"Version" "not-semver"' in expr and '"Name" $.Chart.Name' in expr
    assert chartcopy.chart_expr("") == "$.Chart"


def test_a_failed_up_front_render_leaves_each_case_to_render_on_its_own(tmp_path: Path) -> None:
    # A Helm run past its timeout on a loaded machine (CI, 2026-12-07) raised out of the prefetch, and the
    # session ended with every case of the chart unrun.
    import subprocess

    from pytest_helm_unittest.render import Renderer
    from pytest_helm_unittest.request import RenderRequest, RenderResult

    def request(name: str) -> RenderRequest:
        return RenderRequest(tmp_path, "", (), (), (), name, "default", 1, False, "1", "30", (), "{}")

    slow, quick = request("slow"), request("quick")
    calls: list[str] = []

    class FlakyRenderer(Renderer):
        def _render(self, req: RenderRequest) -> RenderResult:
            calls.append(req.release_name)
            if req is slow and calls.count("slow") == 1:
                raise subprocess.TimeoutExpired(["helm", "template"], 300)
            return RenderResult({"t.yaml": req.release_name})

    renderer = FlakyRenderer(tmp_path / "helm", tmp_path)
    renderer.prefetch({slow, quick}, {slow, quick}, workers=2)
    assert renderer.prefetch_failures == 1
    assert renderer.render(slow).files == {"t.yaml": "slow"}, "the failed render was not cached"
    assert renderer.render(quick).files == {"t.yaml": "quick"}
    assert sorted(calls) == ["quick", "slow", "slow"]
