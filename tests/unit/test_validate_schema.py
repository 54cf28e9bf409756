"""Schema errors: every error of a file at once, each with position, key path, expectation, suggestion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvtier import paths
from kvtier.generate import derived
from kvtier.validate.inputs import loader, merge
from kvtier.validate.inputs.origins import Origins
from kvtier.validate.layers import schema_check

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "target": {"type": "string", "enum": ["standalone", "hyperpod"], "description": "t"},
        "cache": {
            "type": "object",
            "additionalProperties": False,
            "required": ["chunkSize"],
            "properties": {
                "chunkSize": {"type": "integer", "minimum": 16, "description": "c"},
                "hashSeed": {"type": "string", "description": "h"},
            },
        },
        "models": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "replicas": {"type": "integer", "description": "r"},
                    "source": {
                        "oneOf": [
                            {
                                "type": "object",
                                "required": ["huggingface"],
                                "additionalProperties": False,
                                "properties": {"huggingface": {"type": "object"}},
                            },
                            {
                                "type": "object",
                                "required": ["pvc"],
                                "additionalProperties": False,
                                "properties": {"pvc": {"type": "object"}},
                            },
                        ]
                    },
                },
            },
        },
    },
}


@pytest.fixture
def schema_file(tmp_path: Path) -> Path:
    path = tmp_path / "kv-tiered-inference.values.schema.json"
    path.write_text(json.dumps(SCHEMA))
    return path


def alone(loaded: loader.Loaded, schema_file: Path | None = None) -> list[schema_check.Finding]:
    """A file's own values against a schema: a chart without defaults or dependencies."""
    bare = merge.Chart(merge.UMBRELLA, merge.UMBRELLA, {})
    return schema_check.check(merge.Effective(loaded.data, bare), Origins([loaded], bare), schema_file)


def as_helm(loaded: loader.Loaded) -> list[schema_check.Finding]:
    """A file as Helm validates it: coalesced with the charts' defaults, every enabled chart's schema."""
    effective = merge.compute(loaded.data)
    return schema_check.check(effective, Origins([loaded], effective.chart))


def _check(tmp_path: Path, schema_file: Path, text: str) -> list[schema_check.Finding]:
    values = tmp_path / "env.yaml"
    values.write_text(text)
    return alone(loader.load(values), schema_file)


def test_all_errors_at_once_with_positions_and_suggestions(tmp_path: Path, schema_file: Path) -> None:
    text = "target: standlone\ncache:\n  chunkSzie: 256\n  hashSeed: 0\nmodels:\n  - replicas: two\n"
    findings = _check(tmp_path, schema_file, text)
    by_rule = {f.rule: f for f in findings}
    assert set(by_rule) == {"schema.enum", "schema.additionalProperties", "schema.required", "schema.type"}
    enum = by_rule["schema.enum"]
    assert (enum.line, enum.column, enum.path) == (1, 9, "target")
    assert enum.suggestion == "did you mean 'standalone'?" and "standalone, hyperpod" in enum.expected
    typo = by_rule["schema.additionalProperties"]
    assert (typo.line, typo.path, typo.suggestion) == (3, "cache.chunkSzie", "did you mean 'chunkSize'?")
    assert "missing required key 'chunkSize'" in by_rule["schema.required"].message
    types = [f for f in findings if f.rule == "schema.type"]
    assert {(f.path, f.line) for f in types} == {("cache.hashSeed", 4), ("models[0].replicas", 6)}
    assert all(f.file.endswith("env.yaml") for f in findings)


def test_one_of_reports_the_closest_alternative(tmp_path: Path, schema_file: Path) -> None:
    findings = _check(tmp_path, schema_file, "models:\n  - source:\n      huggingfase: {}\n")
    assert findings and all("no alternative of oneOf matched" in f.message for f in findings)
    assert any(f.path.startswith("models[0].source") for f in findings)


def test_valid_file_has_no_findings(tmp_path: Path, schema_file: Path) -> None:
    assert _check(tmp_path, schema_file, "target: hyperpod\ncache: {chunkSize: 256}\n") == []


def test_real_umbrella_schema_accepts_every_environment(need) -> None:
    source = paths.SCHEMA / "kv-tiered-inference.values.schema.json"
    need(source.is_file(), "the umbrella schema source is not written yet")
    files = sorted(paths.VALUES.glob("*.yaml"))
    need(bool(files), "no environment files in values/ yet")
    for path in files:
        assert as_helm(loader.load(path)) == [], path


def test_real_umbrella_schema_names_a_typo(tmp_path: Path, need) -> None:
    need((paths.SCHEMA / "kv-tiered-inference.values.schema.json").is_file(), "no umbrella schema yet")
    values = tmp_path / "env.yaml"
    values.write_text("cache:\n  chunkSzie: 256\n")
    [finding] = as_helm(loader.load(values))
    assert finding.path == "cache.chunkSzie" and finding.suggestion == "did you mean 'chunkSize'?"
    assert (finding.file, finding.line) == (str(values), 2)


def test_text_yaml_reads_as_another_type_is_found_with_the_quoting_fix(tmp_path: Path, need) -> None:
    """`n` and `0o10` are text to PyYAML but false and 8 to Helm, which refuses both for string keys
    (checked against helm3 by hand: "got boolean, want string", "got number, want string")."""
    need((paths.SCHEMA / "kv-tiered-inference.values.schema.json").is_file(), "no umbrella schema yet")
    values = tmp_path / "env.yaml"
    values.write_text("engine:\n  podAnnotations:\n    sidecar.istio.io/inject: n\n  image:\n    tag: 0o10\n")
    findings = {f.path: f for f in as_helm(loader.load(values))}
    assert set(findings) == {"engine.podAnnotations.sidecar.istio.io/inject", "engine.image.tag"}
    inject, tag = findings["engine.podAnnotations.sidecar.istio.io/inject"], findings["engine.image.tag"]
    assert (inject.line, inject.message) == (3, "wrong type: found boolean false")
    assert "quote it" in inject.suggestion and "y, n, yes, no" in inject.suggestion
    assert (tag.line, tag.message) == (5, "wrong type: found integer 8") and "0x/0o/0b" in tag.suggestion


def test_charts_schema_copies_are_current() -> None:
    """Each chart's values.schema.json comes from schema/: a hand edit or a missed generate fails."""
    assert derived.stale() == []


def test_bundled_umbrella_schema_is_a_valid_draft_2020_12_schema(need) -> None:
    """validate skips check_schema at run time (it costs seconds); this is where it is checked."""
    need((paths.SCHEMA / "kv-tiered-inference.values.schema.json").is_file(), "no umbrella schema yet")
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(schema_check.validator().schema)


def test_stale_copy_detection_matches_generate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kvtier import schema as schema_source
    from kvtier.validate import pipeline

    source = tmp_path / "schema" / "demo.values.schema.json"
    source.parent.mkdir()
    source.write_text(
        json.dumps({"type": "object", "properties": {"a": {"type": "string", "description": "a"}}})
    )
    copy = tmp_path / "charts" / "demo" / "values.schema.json"
    copy.parent.mkdir(parents=True)
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    monkeypatch.setattr(paths, "CHARTS", tmp_path / "charts")
    monkeypatch.setattr(schema_source, "chart_sources", lambda: {"demo": source})
    for text, stale in (
        (schema_source.render(schema_source.bundle(source)), ()),
        ("{}\n", ("charts/demo/values.schema.json",)),
        ("not json", ("charts/demo/values.schema.json",)),
        # the same schema laid out differently: the drift test's business, not a different schema
        (json.dumps(schema_source.bundle(source)), ()),
    ):
        copy.write_text(text)
        pipeline._stale_copy_paths.cache_clear()
        assert pipeline._stale_copy_paths() == stale
    pipeline._stale_copy_paths.cache_clear()
