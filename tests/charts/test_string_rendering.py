"""Every string of the values stays a string in the render, even one YAML would read as a number.

A values file that says `name: "2"` gives the chart the string "2"; a template that prints it without
`quote` writes `name: 2`, which the API server refuses for a string field (`expected string, got
&value.valueUnstructured{Value:2}`: the differential test of `kvtier validate` found a token Secret's name
doing that). The test walks the umbrella schema (Curvine's values included) for every free-text string
key, sets it alone to a number-like string over values/staging.yaml, values/hyperpod-g6e-4xlarge.yaml and
values/prod-autoscaled-g6e-4xlarge.yaml (monitors on),
renders with the pinned Helm 3, and looks for that number as a YAML number anywhere in the objects. Only
fields whose Kubernetes type takes a number too (quantities, int-or-string ports) may carry one.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from render import helm_bin, render_one_key

from kvtier import paths
from kvtier import schema as schema_source

NUMBER = "7654321"
# prod-autoscaled renders what the others leave off (KEDA, the monitors, Curvine's ServiceMonitor included).
BASES = (
    paths.VALUES / "staging.yaml",
    paths.VALUES / "hyperpod-g6e-4xlarge.yaml",
    paths.VALUES / "prod-autoscaled-g6e-4xlarge.yaml",
)
# Kubernetes fields whose type is a quantity or an int-or-string: a number there is what the API takes.
NUMERIC_FIELDS = {"cpu", "memory", "storage", "ephemeral-storage", "sizeLimit", "port", "targetPort"}
NUMERIC_PARENTS = {"requests", "limits", "capacity", "hard"}


def string_keys(node: Any, at: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Key paths (outside lists) of free-text strings: type string, no enum."""
    if not isinstance(node, dict):
        return
    kinds = node.get("type")
    if (kinds == "string" or (isinstance(kinds, list) and "string" in kinds)) and "enum" not in node:
        yield at
    for name, sub in (node.get("properties") or {}).items():
        yield from string_keys(sub, (*at, name))
    for branch in ("anyOf", "oneOf", "allOf"):
        for sub in node.get(branch) or []:
            yield from string_keys(sub, at)


def numbers(node: Any, at: str = "") -> Iterator[str]:
    """Paths in a rendered object where NUMBER stands as a YAML number outside numeric fields."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from numbers(value, f"{at}.{key}" if at else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from numbers(value, f"{at}[{i}]")
    elif isinstance(node, int | float) and not isinstance(node, bool) and str(int(node)) == NUMBER:
        parts = at.replace("[", ".").split(".")
        if parts[-1] not in NUMERIC_FIELDS and not NUMERIC_PARENTS & set(parts[:-1]):
            yield at


def test_no_string_of_the_values_renders_as_a_number(need, tmp_path: Path) -> None:
    need(helm_bin(3).exists(), "pinned Helm 3 not built: run `make tools`")
    umbrella = schema_source.bundle(paths.SCHEMA / "kv-tiered-inference.values.schema.json")
    keys = sorted(set(string_keys(umbrella)))
    assert len(keys) > 80, "the schema walk lost its reach"
    cases = [(key, base) for key in keys for base in BASES]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda c: render_one_key(c[0], NUMBER, c[1], tmp_path), cases))
    rendered = [(key, r.stdout) for (key, _), r in zip(cases, results, strict=True) if r.returncode == 0]
    # a key whose pattern or cross-field check refuses a number says nothing about quoting
    assert len(rendered) >= 0.5 * len(cases), "most renders were refused: the test judges too little"
    unquoted = {}
    for key, text in rendered:
        for doc in yaml.safe_load_all(text):
            found = list(numbers(doc)) if isinstance(doc, dict) else []
            if found:
                unquoted[".".join(key)] = f"{doc.get('kind')}/{doc['metadata']['name']}: {found[:2]}"
    assert unquoted == {}, unquoted
    assert any(NUMBER in text for _, text in rendered), "the value never reached a render"
