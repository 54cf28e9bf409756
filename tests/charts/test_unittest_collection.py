"""Which suites run: the plugin collects what the real helm-unittest collects, named case by case.

One chart holds every collection rule that once set the two apart: suites in a nested tests/ folder
(`*` stops at `/`, `**` spans folders), subcharts off by `condition` or by `tags`, a condition written
as a comma list (helm-unittest reads it as one path), a subchart directory named unlike its chart
(looked up by the chart's name), a `.tgz` dependency, a `_`-prefixed directory Helm skips, a library
chart (it renders none of its templates), and a sub-subchart sharing a subchart's name. Each pattern
below runs both tools through the differential harness; the expected case counts come from the real
helm-unittest in the same run, so the test only pins that the chart still exercises the rules.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import unittest_gen
import yaml

from kvtier import paths, unittest_compare

SUITE = """suite: {name} {rel}
templates: [cm.yaml]
tests:
  - it: renders {name}
    asserts:
      - isKind: {{of: ConfigMap}}
  - it: reads the value {name}
    set: {{v: x}}
    asserts:
      - equal: {{path: data.v, value: x}}
"""
CM = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Chart.Name }}-cm
data:
  v: {{ .Values.v | default "none" | quote }}
"""


def _chart(directory: Path, name: str, kind: str = "application", deps: list | None = None) -> None:
    """A chart with one ConfigMap template and suites at tests/a and tests/deep/b."""
    unittest_gen.chart_yaml(directory, name, kind, deps)
    (directory / "templates").mkdir()
    (directory / "templates" / "cm.yaml").write_text(CM)
    for rel in ("a", "deep/b"):
        suite = directory / "tests" / f"{rel}_test.yaml"
        suite.parent.mkdir(parents=True, exist_ok=True)
        suite.write_text(SUITE.format(name=name, rel=rel))


def _collection_chart(root: Path) -> Path:
    top = root / "par"
    deps = [
        {"name": "enabled", "version": "0.1.0", "condition": "enabled.enabled"},
        {"name": "disabled", "version": "0.1.0", "condition": "disabled.enabled"},
        {"name": "tagged", "version": "0.1.0", "tags": ["t1", "t2"]},
        {"name": "tagon", "version": "0.1.0", "tags": ["t3"]},
        {"name": "renamed", "version": "0.1.0"},
        {"name": "mid", "version": "0.1.0"},
        {"name": "common", "version": "0.1.0"},
        {"name": "packed", "version": "0.1.0"},
        {"name": "listed", "version": "0.1.0", "condition": "listed.missing,disabled.enabled"},
        {"name": "lib", "version": "0.1.0"},
    ]
    _chart(top, "par", deps=deps)
    values = {
        "enabled": {"enabled": True},
        "disabled": {"enabled": False},
        "tags": {"t1": False, "t3": True},
        "listed": {"x": 1},
    }
    (top / "values.yaml").write_text(yaml.safe_dump(values))
    charts = top / "charts"
    for directory, name in [
        ("enabled", "enabled"), ("disabled", "disabled"), ("tagged", "tagged"), ("tagon", "tagon"),
        ("other", "renamed"), ("mid", "mid"), ("mid/charts/common", "common"), ("common", "common"),
        ("listed", "listed"), ("_hidden", "hidden"),
    ]:  # fmt: skip
        _chart(charts / directory, name)
    _chart(charts / "lib", "lib", kind="library")
    _chart(root / "packed-src", "packed")
    unittest_gen.package(root / "packed-src", charts, paths.TOOLS_BIN / "helm3")
    return top


@pytest.fixture(scope="module")
def chart(tmp_path_factory, need) -> Path:
    need((paths.TOOLS_BIN / "helm-unittest").exists(), "the real helm-unittest is not built (make tools)")
    need((paths.TOOLS_BIN / "helm3").exists(), "pinned Helm 3 not built (make tools)")
    return _collection_chart(tmp_path_factory.mktemp("collection"))


@pytest.mark.parametrize(
    ("patterns", "with_subchart", "at_least"),
    [
        ((), True, 14),
        (("tests/**/*_test.yaml",), True, 28),
        (("tests/**/*_test.yaml",), False, 4),
        (("**/a_test.yaml",), True, 30),
        (("tests/**_test.yaml",), True, 0),
        (("tests/[ad]*_test.yaml",), True, 14),
        (("tests/?_test.yaml", "tests/**/*_test.yaml", "tests/?_test.yaml"), True, 40),
        (("tests/[^a]*/*_test.yaml",), True, 14),
    ],
    ids=["default", "double-star", "no-subchart", "star-first", "star-suffix", "class", "repeats", "negated"],
)
def test_the_plugin_collects_what_helm_unittest_collects(
    chart: Path, tmp_path: Path, patterns: tuple[str, ...], with_subchart: bool, at_least: int
) -> None:
    result = unittest_compare.compare(chart, tmp_path, unittest_compare.Collection(patterns, with_subchart))
    assert result.differences == {}
    assert len(result.real) >= at_least
    suites = {suite for suite, _it, _n in result.real}
    if not any(p.startswith("**") for p in patterns):  # a top-level `**` reaches into charts/ itself
        assert not any(s.startswith(("disabled", "tagged", "renamed", "packed", "hidden")) for s in suites)
    if with_subchart and at_least:
        assert any(s.startswith("tagon") for s in suites) and any(s.startswith("listed") for s in suites)


def test_a_library_chart_renders_none_of_its_templates(chart: Path, tmp_path: Path) -> None:
    result = unittest_compare.compare(chart / "charts" / "lib", tmp_path)
    assert result.differences == {}
    assert result.real and all(v.outcome == "failed" for v in result.real.values())
