"""The curvine chart's values are documented and strictly typed in one place each:
- every value in values.yaml has a helm-docs `# --` comment (itself or an enclosing key);
- the README's values table lists exactly the documented keys;
- values.schema.json is the generated copy of schema/curvine.values.schema.json, strict
  (additionalProperties false except `global`), every property described, and values.yaml passes it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import yaml

from kvtier import paths
from kvtier.generate import derived

CHART = paths.CHARTS / "curvine"
KEY = re.compile(r"^(\s*)([A-Za-z0-9_.-]+):")
ROW = re.compile(r"^\| `([^`]+)` \|")


def documented_keys(text: str) -> set[str]:
    """Dotted paths of mapping keys that a `# --` comment block directly precedes."""
    found: set[str] = set()
    stack: list[tuple[int, str]] = []
    pending = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("# --"):
            pending = True
            continue
        match = KEY.match(line)
        if match:
            indent = len(match.group(1))
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, match.group(2)))
            if pending:
                found.add(".".join(key for _, key in stack))
        if stripped and not stripped.startswith("#"):
            pending = False
    return found


def leaves(node: Any, prefix: str = "") -> list[str]:
    """Dotted paths of every value; a list or an empty map counts as one value."""
    if isinstance(node, dict) and node:
        return [leaf for key, value in node.items() for leaf in leaves(value, f"{prefix}{key}.")]
    return [prefix.rstrip(".")]


def test_every_value_is_documented_in_values_yaml() -> None:
    text = (CHART / "values.yaml").read_text()
    docs = documented_keys(text)
    undocumented = [
        leaf
        for leaf in leaves(yaml.safe_load(text))
        if not any(leaf == d or leaf.startswith(f"{d}.") for d in docs)
    ]
    assert not undocumented
    assert len(docs) > 100


def test_readme_table_lists_exactly_the_documented_values() -> None:
    readme = (CHART / "README.md").read_text()
    rows = {m.group(1) for line in readme.splitlines() if (m := ROW.match(line))}
    docs = documented_keys((CHART / "values.yaml").read_text())
    assert sorted(docs - rows) == [], "documented in values.yaml but missing from the README table"
    assert sorted(rows - docs) == [], "in the README table but not in values.yaml"


def test_schema_copy_is_generated_from_the_single_source() -> None:
    target = CHART / "values.schema.json"
    assert target not in derived.stale(), "run `kvtier generate`"


def _schema() -> dict[str, Any]:
    return json.loads((CHART / "values.schema.json").read_text())


def test_schema_is_strict_and_described() -> None:
    problems: list[str] = []

    def walk(node: Any, where: str) -> None:
        if isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{where}[{i}]")
            return
        if not isinstance(node, dict):
            return
        if "properties" in node:
            if where != "$.global" and node.get("additionalProperties") is not False:
                problems.append(f"{where}: additionalProperties must be false")
            for name, prop in node["properties"].items():
                if "description" not in prop:
                    problems.append(f"{where}.{name}: no description")
        for key, value in node.items():
            walk(value, f"{where}.{key}" if key != "properties" else where)

    walk(_schema(), "$")
    assert not problems


def test_values_yaml_and_ci_scenarios_pass_the_schema() -> None:
    validator = jsonschema.Draft202012Validator(_schema())
    base = yaml.safe_load((CHART / "values.yaml").read_text())
    assert list(validator.iter_errors(base)) == []
    for scenario in sorted((CHART / "ci").glob("*-values.yaml")):
        merged = _merge(base, yaml.safe_load(scenario.read_text()) or {})
        assert [e.message for e in validator.iter_errors(merged)] == [], scenario.name


def test_schema_refuses_typos_and_bad_values() -> None:
    validator = jsonschema.Draft202012Validator(_schema())
    base = yaml.safe_load((CHART / "values.yaml").read_text())
    bad = [
        {"master": {"replica": 3}},
        {"worker": {"dataDirs": [{"path": "/d", "type": "NVME"}]}},
        {"worker": {"dataDirs": [{"path": "/d", "type": "SSD", "capacity": "1.5TB"}]}},
        {"master": {"replicas": 7}},
        {"image": {"digest": "sha256:xyz"}},
        {"master": {"persistence": {"subDirectory": "../up"}}},
        {"global": {"imageRegistry": 5}},
    ]
    for override in bad:
        assert list(validator.iter_errors(_merge(base, override))), override
    # `global` stays open for an umbrella chart.
    assert list(validator.iter_errors(_merge(base, {"global": {"anything": 1}}))) == []


def _merge(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        return {**base, **{k: _merge(base.get(k), v) for k, v in over.items()}}
    return over


# Template variables that alias a values subtree ({{- $csi := .Values.csi }}).
ALIASES = {"$csi": "csi", "$t": "tests"}
REF = re.compile(r"(\.Values|\$csi|\$t)\.([A-Za-z0-9_.]*[A-Za-z0-9_])")
# Read by a parent chart's dependency condition, not by this chart's templates.
UNREAD_ON_PURPOSE = {"enabled"}


def _template_refs() -> set[str]:
    refs = set()
    for tpl in (CHART / "templates").iterdir():
        for head, path in REF.findall(tpl.read_text()):
            refs.add(path if head == ".Values" else f"{ALIASES[head]}.{path}")
    # An alias definition is not a read of the whole subtree.
    return refs - set(ALIASES.values())


def test_templates_read_only_declared_values_and_every_value_is_read() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    declared = leaves(values)
    refs = _template_refs()
    undeclared = [r for r in refs if not any(d == r or d.startswith(f"{r}.") for d in declared)]
    assert sorted(undeclared) == [], "templates read values that values.yaml does not declare"
    unread = [
        d
        for d in declared
        if d not in UNREAD_ON_PURPOSE and not any(d == r or d.startswith(f"{r}.") for r in refs)
    ]
    assert sorted(unread) == [], "values no template reads"
