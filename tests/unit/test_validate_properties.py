"""Property-based tests of the in-process layers (loader, schema, rules; no Helm): thousands of values
generated from the umbrella schema and mutations of valid files never crash, and every invalid case
ends in exit 2 (unusable input, the message names the file) or exit 1 with a finding naming the key."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvtier import helmyaml, paths
from kvtier.errors import UserError
from kvtier.validate import pipeline
from kvtier.validate.inputs import loader, merge
from kvtier.validate.layers import schema_check


def _settings(examples: int) -> settings:
    """400 generated + 850 mutated + 850 damaged = 2,100 cases; derandomized: CI runs are reproducible."""
    return settings(
        max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
    )


OPTIONS = pipeline.Options(render=False)
DUMPER = helmyaml.Dumper  # values files as Helm reads them: `0E0` must stay text
GOOD = Path(__file__).parents[1] / "fixtures" / "values" / "good-minimal.yaml"
SOURCES = [*sorted(paths.VALUES.glob("*.yaml")), GOOD]


def _schema() -> dict[str, Any]:
    # schema/ is a source of this repository, not a built prerequisite: an unusable schema is a defect here,
    # everywhere, not a reason to skip the 400 generated cases.
    try:
        return schema_check.validator().schema
    except UserError as error:
        pytest.fail(f"umbrella schema unusable: {error}", pytrace=False)


def helm_invalid(values: dict[str, Any]) -> bool:
    """Whether the schemas refuse these values once coalesced with the chart defaults (what Helm checks;
    tests/charts/test_partial_overrides.py holds that against the real Helm)."""
    try:
        return bool(schema_check.errors(merge.compute(values)))
    except merge.TypeMismatch:
        return True


def from_schema(node: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values for a subset of JSON Schema 2020-12 (what the bundle's schemas use). Not every output is
    valid (patterns inside anyOf, cross-keyword constraints): the tests check validity themselves."""
    if not isinstance(node, dict) or depth > 8:
        return st.none()
    if "const" in node:
        return st.just(node["const"])
    if "enum" in node:
        return st.sampled_from(node["enum"])
    for key in ("anyOf", "oneOf"):
        if key in node:
            return st.one_of([from_schema(alt, depth + 1) for alt in node[key]])
    kind = node.get("type")
    if isinstance(kind, list):
        return st.one_of([from_schema({**node, "type": k}, depth) for k in kind])
    if kind == "object" or "properties" in node:
        props = node.get("properties", {})
        required = [k for k in node.get("required", []) if k in props]
        optional = [k for k in props if k not in required]
        extra = node.get("additionalProperties")
        base = st.fixed_dictionaries(
            {k: from_schema(props[k], depth + 1) for k in required},
            optional={k: from_schema(props[k], depth + 1) for k in optional},
        )
        if isinstance(extra, dict) and not props:
            return st.dictionaries(
                st.from_regex(r"[a-z][a-z0-9.-]{0,12}", fullmatch=True),
                from_schema(extra, depth + 1),
                max_size=3,
            )
        return base
    if kind == "array":
        items = from_schema(node.get("items", {"type": "string"}), depth + 1)
        return st.lists(items, min_size=node.get("minItems", 0), max_size=min(node.get("maxItems", 3), 3))
    if kind == "string":
        if "pattern" in node:
            return st.from_regex(node["pattern"], fullmatch=True).filter(lambda s: "\n" not in s)
        return st.text(
            st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]),
            min_size=node.get("minLength", 0),
            max_size=20,
        )
    if kind == "integer":
        return st.integers(node.get("minimum", -(2**31)), node.get("maximum", 2**31))
    if kind == "number":
        return st.floats(node.get("minimum", 0), node.get("maximum", 1e6), allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    return st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5))


def _run(text: str) -> tuple[int, pipeline.FileReport | None, str]:
    """(exit code, report, error) of the in-process layers for one document."""
    try:
        loaded = loader.load_bytes(text.encode("utf-8", "surrogatepass"), Path("generated.yaml"))
    except UserError as error:
        return 2, None, str(error)
    report = pipeline.check_loaded(loaded, OPTIONS)
    return pipeline.exit_code([report]), report, ""


@_settings(400)
@given(st.data())
def test_values_generated_from_the_schema(data: st.DataObject) -> None:
    values = data.draw(from_schema(_schema()))
    text = yaml.dump(values, Dumper=DUMPER, sort_keys=False, allow_unicode=True)
    code, report, error = _run(text)
    if code == 2:
        assert "generated.yaml" in error
        return
    assert report is not None
    # Judged as read back from the file, as Helm reads it: YAML folds some characters a generated string
    # may hold (NEL, U+0085, becomes a space), which decides a pattern matched as Go matches it.
    valid = not helm_invalid(loader.load_bytes(text.encode("utf-8", "surrogatepass"), Path("g.yaml")).data)
    schema_findings = [
        f for f in report.findings if f.rule.startswith("schema.") and f.rule != "schema.stale-copy"
    ]
    assert bool(schema_findings) == (not valid)  # the validator and our findings agree
    for f in report.findings:
        assert f.path or f.subject or f.rule == "schema.stale-copy", f  # every finding names its key


def _rename(values: dict[str, Any], key_path: list[Any], new: str) -> None:
    node = values
    for key in key_path[:-1]:
        node = node[key]
    node[new] = node.pop(key_path[-1])


def _key_paths(tree: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = []
    if isinstance(tree, dict):
        for k, v in tree.items():
            out.append((*at, k))
            out.extend(_key_paths(v, (*at, k)))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            out.extend(_key_paths(v, (*at, i)))
    return out


MUTANT_VALUES = st.one_of(
    st.integers(), st.booleans(), st.none(), st.text(max_size=8), st.lists(st.integers(), max_size=2)
)


@_settings(850)
@given(st.sampled_from(SOURCES), st.data())
def test_mutated_valid_files(source: Path, data: st.DataObject) -> None:
    """Rename a key (a typo) or replace a value: an invalid result names the key it broke."""
    values = loader.load(source).data
    keys = [p for p in _key_paths(values) if isinstance(p[-1], str)]
    target = data.draw(st.sampled_from(keys))
    mutated = copy.deepcopy(values)
    if data.draw(st.booleans()):
        new = target[-1] + data.draw(st.sampled_from(["x", "s", "_"]))
        _rename(mutated, list(target), new)
        broken = ".".join(str(p) for p in (*target[:-1], new))
    else:
        node = mutated
        for key in target[:-1]:
            node = node[key]
        node[target[-1]] = data.draw(MUTANT_VALUES)
        broken = ".".join(str(p) for p in target)
    code, report, _ = _run(yaml.dump(mutated, Dumper=DUMPER, sort_keys=False))
    assert code in (0, 1, 2)
    assert not helm_invalid(values), f"{source} must be a valid file"
    if helm_invalid(mutated):
        assert code == 1 and report is not None
        named = [re.sub(r"\[(\d+)\]", r".\1", f.path) for f in report.findings]
        # the key itself, or (for a missing key or a oneOf branch) its parent object
        assert any(n == broken or broken.startswith(n + ".") or n.startswith(broken) for n in named), (
            broken,
            named,
        )


@_settings(850)
@given(st.sampled_from(SOURCES), st.data())
def test_damaged_bytes_never_crash(source: Path, data: st.DataObject) -> None:
    """Truncation, tabs, duplicated lines, random bytes: exit 2 naming the file, or a normal report."""
    text = source.read_text()
    lines = text.splitlines(keepends=True)
    how = data.draw(st.sampled_from(["truncate", "tab", "duplicate", "byte", "indent"]))
    i = data.draw(st.integers(0, max(len(lines) - 1, 0)))
    if how == "truncate":
        text = text[: data.draw(st.integers(0, len(text)))]
    elif how == "tab":
        lines[i] = "\t" + lines[i]
        text = "".join(lines)
    elif how == "duplicate":
        text = "".join([*lines[: i + 1], lines[i], *lines[i + 1 :]])
    elif how == "indent":
        lines[i] = "   " + lines[i]
        text = "".join(lines)
    else:
        pos = data.draw(st.integers(0, max(len(text) - 1, 0)))
        text = text[:pos] + chr(data.draw(st.integers(0, 0x2FF))) + text[pos + 1 :]
    code, report, error = _run(text)
    if code == 2:
        assert error.startswith("generated.yaml"), error
    else:
        assert report is not None and code in (0, 1)
