"""The umbrella's values are typed and documented once: the generated schema is strict with a
description on every property (the subchart keeps `global` and `enabled` open), values.yaml and every
environment pass it, bad input is refused with the key named, and every values.yaml key is documented."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from kvtier import paths

CHART = paths.CHARTS / "kv-tiered-inference"
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
OPEN = {"global", "curvine.global"}  # parents may add their own keys here


def objects(node: Any, where: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = []
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            found.append((where, node))
            for key, child in node["properties"].items():
                found += objects(child, f"{where}.{key}".lstrip("."))
        for keyword in ("items", "additionalProperties"):
            if isinstance(node.get(keyword), dict):
                found += objects(node[keyword], f"{where}[]")
        for keyword in ("anyOf", "oneOf", "allOf"):
            for child in node.get(keyword, []):
                found += objects(child, where)
    return found


def test_schema_is_strict_and_described() -> None:
    problems = []
    for where, node in objects(SCHEMA):
        if where not in OPEN and node.get("additionalProperties") is not False:
            problems.append(f"{where or '(root)'}: additionalProperties is not false")
        for key, child in node["properties"].items():
            if not child.get("description"):
                problems.append(f"{where}.{key}: no description")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "values",
    [
        CHART / "values.yaml",
        *sorted(paths.VALUES.glob("*.yaml")),
        *sorted((CHART / "ci").glob("*-values.yaml")),
    ],
    ids=lambda p: p.name,
)
def test_values_pass_the_schema(values: Path) -> None:
    jsonschema.Draft202012Validator(SCHEMA).validate(yaml.safe_load(values.read_text()) or {})


PVC = {"claimName": "c", "path": "p"}


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"cache": {"chunkSize": 256, "chunk_size": 256}}, "chunk_size"),
        ({"cache": {"hashSeed": "random"}}, "hashSeed"),
        ({"routing": {"strategy": "leastloaded"}}, "strategy"),
        ({"cache": {"l1": {"size": "lots"}}}, "size"),
        ({"cache": {"l2": {"eviction": {"highWatermark": "85 percent"}}}}, "highWatermark"),
        (
            {
                "models": [
                    {
                        "name": "m",
                        "model": "x",
                        "source": {"huggingface": {}, "pvc": {"claimName": "c", "path": "p"}},
                    }
                ]
            },
            "source",
        ),
    ],
)
def test_bad_values_are_refused(values: dict[str, Any], where: str) -> None:
    errors = list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(values))
    assert errors
    assert any(where in (".".join(map(str, e.absolute_path)) + e.message) for e in errors)


KEY = re.compile(r"^(\s*)(?:-\s+)?([A-Za-z0-9_.-]+):")


def test_every_values_key_is_documented() -> None:
    """Each key has a `# --` comment, or sits under a documented key whose value it is part of."""
    undocumented, stack, pending = [], [], False
    for line in (CHART / "values.yaml").read_text().splitlines():
        stripped = line.strip()
        if "# --" in stripped:  # also `-  # -- doc`, which opens a list item
            pending = True
            continue
        if stripped.startswith("#") or not stripped:
            continue
        match = KEY.match(line)
        if not match:
            continue
        indent = len(match.group(1)) + (2 if stripped.startswith("- ") else 0)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        documented = pending or any(doc for _, _, doc in stack)
        if not documented:
            undocumented.append(".".join([k for _, k, _ in stack] + [match.group(2)]))
        stack.append((indent, match.group(2), pending))
        pending = False
    assert not undocumented, undocumented
