"""kvtier.validate.inputs.merge against the real Helm 3 and Helm 4: a throwaway parent chart with a subchart
prints `toJson .Values` of both, and every scenario's effective values, subchart values and schema verdict
must be Helm's own. Covers partial overrides, lists, type clashes, nulls (on chart defaults, on keys
without one, under the subchart), globals, several -f files, a disabled subchart and Helm's refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from render import helm_bin, render

from kvtier.validate.inputs import loader, merge
from kvtier.validate.inputs.origins import Origins
from kvtier.validate.layers import schema_check

TEMPLATE = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Chart.Name }}-values
data:
  values: {{ toJson .Values | quote }}
"""
PARENT = {
    "global": {"region": "eu", "nested": {"a": 1, "b": 2}},
    "image": {"repository": "repo", "tag": "1.0", "pullPolicy": "IfNotPresent"},
    "list": [1, 2, 3],
    "scalarDefault": "plain",
    "mapDefault": {"k": "v"},
    "deep": {"one": {"two": {"three": 3, "four": 4}}},
    "sub": {"fromParent": "p", "shared": {"x": "parent"}},
}
SUB = {
    "enabled": True,
    "global": {"region": "none", "own": "sub", "nested": {"c": 3}},
    "fromSub": "s",
    "fromParent": "sub-default",
    "shared": {"x": "sub", "other": "sub"},
    "image": {"repository": "subrepo", "tag": "2.0"},
}
PARENT_SCHEMA = {
    "type": "object",
    "properties": {
        "image": {
            "type": "object",
            "required": ["repository", "tag"],
            "properties": {"repository": {"type": "string"}, "tag": {"type": "string"}},
        }
    },
}
SUB_SCHEMA = {
    "type": "object",
    "properties": {
        "shared": {"type": "object", "required": ["x"], "properties": {"x": {"type": "string"}}},
        "fromSub": {"type": "string"},
    },
}

# name -> the -f files, in order. Each is rendered by both majors and compared with the port.
SCENARIOS: dict[str, list[dict[str, Any]]] = {
    "partial overrides": [
        {"image": {"tag": "9"}, "deep": {"one": {"two": {"three": 33}}}, "sub": {"image": {"tag": "8"}}}
    ],
    "lists replace, types clash": [
        {"list": [9], "scalarDefault": {"now": "map"}, "mapDefault": "now scalar"}
    ],
    "nulls": [
        {
            "image": {"pullPolicy": None},
            "scalarDefault": None,
            "notDefault": None,
            "deep": {"one": {"two": {"four": None, "fresh": None}}},
            "sub": {"fromSub": None, "fromParent": None, "shared": {"other": None}, "unknownNull": None},
        }
    ],
    "globals": [
        {
            "global": {"region": "us", "nested": {"b": 20}, "extra": "e"},
            "sub": {"global": {"region": "x", "own": "mine"}},
        }
    ],
    "two files": [
        {
            "image": {"tag": "a", "repository": "r2"},
            "list": [1],
            "sub": {"shared": {"x": "f1", "other": "f1"}},
        },
        {"image": {"pullPolicy": None}, "list": [5, 6], "sub": {"shared": {"x": "f2"}}, "deep": None},
    ],
    "a later file's map over a scalar": [
        {"mapDefault": "s", "image": "flat"},
        {"mapDefault": {"back": 1}, "image": {"tag": "t"}},
    ],
    "subchart disabled": [{"sub": {"enabled": False, "extra": 1, "shared": {"x": None}}}],
    "condition not a boolean": [{"sub": {"enabled": "no"}}],
    "subchart block null": [{"sub": None}],
    "subchart block not a mapping": [{"sub": "off"}],
    "required key removed by null": [{"image": {"repository": None}}],
    "subchart's required key removed by null": [{"sub": {"shared": {"x": None}}}],
    "wrong type from a later file": [{"image": {"tag": "ok"}}, {"image": {"tag": 5}}],
    "a later file's null removes a required key": [{"image": {"tag": "a"}}, {"image": {"tag": None}}],
}


@pytest.fixture(scope="module")
def chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("helm-values") / "parent"
    sub = root / "charts" / "sub"
    for directory, name, values, schema in (
        (root, "parent", PARENT, PARENT_SCHEMA),
        (sub, "sub", SUB, SUB_SCHEMA),
    ):
        (directory / "templates").mkdir(parents=True)
        meta: dict[str, Any] = {"apiVersion": "v2", "name": name, "version": "0.1.0"}
        if directory == root:
            meta["dependencies"] = [
                {
                    "name": "sub",
                    "version": "0.1.0",
                    "repository": "file://charts/sub",
                    "condition": "sub.enabled",
                }
            ]
        (directory / "Chart.yaml").write_text(yaml.safe_dump(meta))
        (directory / "values.yaml").write_text(yaml.safe_dump(values))
        (directory / "values.schema.json").write_text(json.dumps(schema))
        (directory / "templates" / "values.yaml").write_text(TEMPLATE)
    return root


def helm_values(chart: Path, files: list[Path], major: int) -> tuple[dict[str, Any] | None, str]:
    """(chart name -> the .Values Helm rendered it with, or None when Helm refused; Helm's stderr)."""
    result = render(chart, values=files, major=major)
    if result.returncode != 0:
        return None, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    return {d["metadata"]["name"].removesuffix("-values"): json.loads(d["data"]["values"]) for d in docs}, ""


def ours(
    chart: Path, layers: list[loader.Loaded]
) -> tuple[dict[str, Any] | None, list[schema_check.Finding]]:
    """(the port's .Values per chart, or None where it says Helm stops; the schema findings)."""
    user = merge.merge_layers(*(layer.data for layer in layers))
    try:
        effective = merge.compute(user, merge.load_chart(chart))
    except merge.TypeMismatch:
        return None, []
    rendered = {"parent": effective.values}
    if effective.chart.dependency("sub"):
        rendered["sub"] = effective.values["sub"]
    return rendered, schema_check.check(effective, Origins(layers, effective.chart))


def _files(tmp_path: Path, layers: list[dict[str, Any]]) -> tuple[list[Path], list[loader.Loaded]]:
    paths = []
    for i, layer in enumerate(layers):
        path = tmp_path / f"values-{i}.yaml"
        path.write_text(yaml.safe_dump(layer, sort_keys=False))
        paths.append(path)
    return paths, [loader.load(p) for p in paths]


@pytest.mark.parametrize("major", [3, 4])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_effective_values_and_verdict_are_helms(
    need, chart: Path, tmp_path: Path, scenario: str, major: int
) -> None:
    need(helm_bin(major).exists(), f"pinned Helm {major} not built: run `make tools`")
    files, layers = _files(tmp_path, SCENARIOS[scenario])
    theirs, stderr = helm_values(chart, files, major)
    mine, findings = ours(chart, layers)
    if theirs is None:
        assert mine is None or findings, f"Helm {major} refused ({stderr.strip()}), the port found nothing"
        return
    assert findings == [], f"Helm {major} rendered, the port found {findings}"
    assert mine == theirs


def test_a_partial_override_keeps_the_chart_defaults(chart: Path, tmp_path: Path) -> None:
    _, layers = _files(tmp_path, SCENARIOS["partial overrides"])
    mine, findings = ours(chart, layers)
    assert findings == [] and mine is not None
    assert mine["parent"]["image"] == {"repository": "repo", "tag": "9", "pullPolicy": "IfNotPresent"}
    assert mine["sub"]["image"] == {"repository": "subrepo", "tag": "8"}


def test_the_parents_block_wins_over_the_subcharts_defaults(chart: Path, tmp_path: Path) -> None:
    """The reverse of what preflight's own merge did: values.yaml < parent's `sub:` block < the user."""
    _, layers = _files(tmp_path, [{"sub": {"shared": {"other": "user"}}}])
    mine, _ = ours(chart, layers)
    assert mine is not None
    assert mine["sub"]["fromParent"] == "p" and mine["sub"]["shared"] == {"x": "parent", "other": "user"}
    assert mine["sub"]["global"]["region"] == "eu", "the parent's globals win over the subchart's"


def test_a_null_that_removes_a_required_key_is_reported_at_the_null(chart: Path, tmp_path: Path) -> None:
    _, layers = _files(tmp_path, SCENARIOS["required key removed by null"])
    _, findings = ours(chart, layers)
    [finding] = findings
    assert finding.rule == "schema.required" and finding.path == "image"
    assert (finding.file, finding.line) == (str(layers[0].path), 2)
    assert "`image.repository: null` removes the chart's default at" in finding.message
    assert "parent/values.yaml" in finding.message


def test_a_subcharts_required_key_is_judged_by_its_own_schema(chart: Path, tmp_path: Path) -> None:
    _, layers = _files(tmp_path, SCENARIOS["subchart's required key removed by null"])
    _, findings = ours(chart, layers)
    [finding] = findings
    assert finding.path == "sub.shared" and "missing required key 'x'" in finding.message
    assert finding.file == str(layers[0].path) and finding.line == 3


def test_a_wrong_type_points_at_the_file_that_wrote_it(chart: Path, tmp_path: Path) -> None:
    _, layers = _files(tmp_path, SCENARIOS["wrong type from a later file"])
    _, findings = ours(chart, layers)
    [finding] = findings
    assert finding.rule == "schema.type" and finding.path == "image.tag"
    assert (finding.file, finding.line) == (str(layers[1].path), 2)
