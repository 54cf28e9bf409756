"""Property: `kvtier validate` (schema and rules layers, in process) accepts a partial override of an
environment exactly when the real Helm 3 renders it.

For every object of the umbrella's schema that has required keys or nested objects (the top level
included), an example takes an environment from values/, replaces that object with a few of its effective
leaves (the rest falls back to the chart's defaults, or, under a list, disappears with the list item),
sometimes changes a kept leaf to another value of its schema type, writes the file and asks both.
The oracle is `helm template` of the pinned Helm 3, never our code, rendering for a cluster that serves
every API the charts probe (SERVED): whether a cluster serves the Prometheus Operator, KEDA, Kyverno or
MutatingAdmissionPolicy is the cluster's business (the render layer, --server and preflight judge it),
not the values'.

KVTIER_PARTIAL_EXAMPLES sets the number of examples (default 40; each costs one render, ~0.3-1 s).
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
from functools import cache
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from render import helm_bin

from kvtier import paths
from kvtier.helm import clean_error
from kvtier.validate import pipeline
from kvtier.validate.inputs import loader, merge
from kvtier.validate.layers import render, schema_check

EXAMPLES = int(os.environ.get("KVTIER_PARTIAL_EXAMPLES", "40"))
# Every `.Capabilities.APIVersions.Has` of the charts' templates.
SERVED = (
    "monitoring.coreos.com/v1/ServiceMonitor",
    "monitoring.coreos.com/v1/PrometheusRule",
    "keda.sh/v1alpha1/ScaledObject",
    "kyverno.io/v1/Policy",
    "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy",
)
ENVIRONMENTS = sorted(paths.VALUES.glob("*.yaml"))
Path_ = tuple[str | int, ...]


def _resolve(node: Any, root: dict[str, Any]) -> Any:
    ref = node.get("$ref") if isinstance(node, dict) else None
    while isinstance(ref, str) and ref.startswith("#/"):
        for part in ref[2:].split("/"):
            root = root[part]
        node, ref = root, root.get("$ref") if isinstance(root, dict) else None
    return node


def _alternatives(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [node, *node.get("anyOf", []), *node.get("oneOf", []), *node.get("allOf", [])]


def _object_paths(node: Any, root: dict[str, Any], at: Path_ = ()) -> list[tuple[Path_, dict[str, Any]]]:
    """Every object with properties, required keys or nested objects, with its schema node."""
    out = []
    node = _resolve(node, root)
    if not isinstance(node, dict):
        return out
    for alt in _alternatives(node):
        props = alt.get("properties") or {}
        nested = any(
            isinstance(_resolve(p, root), dict) and _resolve(p, root).get("properties")
            for p in props.values()
        )
        if props and (alt.get("required") or nested):
            out.append((at, alt))
        for key, child in props.items():
            out += _object_paths(child, root, (*at, key))
        if isinstance(alt.get("items"), dict):
            out += _object_paths(alt["items"], root, (*at, 0))
    return out


@cache
def object_paths() -> list[tuple[Path_, dict[str, Any]]]:
    root = schema_check.validator().schema
    seen: dict[Path_, dict[str, Any]] = {}
    for at, node in _object_paths(root, root):
        seen.setdefault(at, node)
    return sorted(seen.items(), key=lambda item: [str(p) for p in item[0]])


def value_at(data: Any, at: Path_) -> Any:
    for part in at:
        if (isinstance(data, dict) and part in data) or (isinstance(data, list) and part in range(len(data))):
            data = data[part]
        else:
            return None
    return data


def leaves(data: Any, at: Path_ = ()) -> list[Path_]:
    """Key paths of every leaf under a mapping (lists and empty mappings are leaves)."""
    if not isinstance(data, dict) or not data:
        return [at]
    return [leaf for key, value in data.items() for leaf in leaves(value, (*at, key))]


def schema_at(node: dict[str, Any], at: Path_, root: dict[str, Any]) -> dict[str, Any] | None:
    for part in at:
        node = _resolve(node, root)
        found = None
        for alt in _alternatives(node):
            if isinstance(part, int) and isinstance(alt.get("items"), dict):
                found = alt["items"]
            elif isinstance(part, str) and part in (alt.get("properties") or {}):
                found = alt["properties"][part]
            if found is not None:
                break
        if found is None:
            return None
        node = found
    return _resolve(node, root)


def other_value(node: dict[str, Any] | None, current: Any) -> st.SearchStrategy[Any] | None:
    """Another value the schema allows for this leaf: an enum member, the other boolean, an integer in
    range. Free strings keep theirs (a pattern's random match says nothing about merging)."""
    if not node:
        return None
    for alt in _alternatives(node):
        if "enum" in alt:
            return st.sampled_from(alt["enum"])
        kind = alt.get("type")
        if kind == "boolean" and isinstance(current, bool):
            return st.booleans()
        if kind == "integer" and isinstance(current, int) and not isinstance(current, bool):
            low = alt.get("minimum", 0)
            return st.integers(low, alt.get("maximum", max(low, current) * 4 + 8))
    return None


def put(data: dict[str, Any], at: Path_, value: Any) -> None:
    """Set `value` at a key path, creating the mappings (and list items) on the way."""
    node: Any = data
    for i, part in enumerate(at[:-1]):
        following: Any = [] if isinstance(at[i + 1], int) else {}
        if isinstance(node, list):
            while len(node) <= int(part):
                node.append(copy.deepcopy(following))
            if not isinstance(node[part], type(following)):
                node[part] = following
            node = node[part]
        else:
            if not isinstance(node.get(part), type(following)):
                node[part] = following
            node = node[part]
    if isinstance(node, list):
        while len(node) <= int(at[-1]):
            node.append(None)
    node[at[-1]] = value


@st.composite
def partial_overrides(draw: st.DrawFn) -> dict[str, Any]:
    source = draw(st.sampled_from(ENVIRONMENTS))
    user = loader.load(source).data
    effective = merge.effective(user)
    root = schema_check.validator().schema
    candidates = [(at, node) for at, node in object_paths() if isinstance(value_at(effective, at), dict)]
    at, node = draw(st.sampled_from(candidates))
    whole = value_at(effective, at)
    keep = draw(st.lists(st.sampled_from(leaves(whole)), min_size=1, max_size=2, unique=True))
    partial: dict[str, Any] = {}
    for leaf in keep:
        value = copy.deepcopy(value_at(whole, leaf))
        change = other_value(schema_at(node, leaf, root), value)
        if change is not None and draw(st.booleans()):
            value = draw(change)
        if leaf:
            put(partial, leaf, value)
        else:
            partial = value
    override = copy.deepcopy(user) if at else {}
    if at:
        put(override, at, partial)
    else:
        override = partial
    note(f"from {source.name}, object {'.'.join(map(str, at)) or '(top level)'}:\n{yaml.safe_dump(override)}")
    return override


@pytest.fixture(scope="module")
def chart_ready(need) -> None:
    need(helm_bin(3).exists(), "pinned Helm 3 not built: run `make tools`")
    need(bool(ENVIRONMENTS), "no environments in values/")
    problem = render.ensure_dependencies()
    assert not problem, problem


def test_the_schema_walk_covers_the_nested_objects() -> None:
    """The generator's reach: objects with required keys (engine.image) and list items (models[0])."""
    found = {at for at, _ in object_paths()}
    assert {(), ("engine", "image"), ("router",), ("models", 0)} <= found, sorted(found)[:20]


def test_served_names_every_api_the_charts_probe() -> None:
    probed = set()
    for template in (p for p in paths.CHARTS.glob("*/templates/**/*") if p.is_file()):
        for line in template.read_text().splitlines():
            if "APIVersions.Has" in line or "requireApi" in line:
                probed |= set(re.findall(r'"([\w.-]+/v\w+/[A-Z]\w+)"', line))
    assert probed and probed <= set(SERVED), sorted(probed - set(SERVED))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(override=partial_overrides())
def test_validate_accepts_a_partial_override_exactly_when_helm_renders_it(
    chart_ready: None, tmp_path_factory: pytest.TempPathFactory, override: dict[str, Any]
) -> None:
    file = tmp_path_factory.mktemp("partial") / "override.yaml"
    file.write_text(yaml.safe_dump(override, sort_keys=False))
    command = render.template(file, 3, "kvtier", "kvtier", "1.30.0").command()
    helm = subprocess.run(
        [*command, *(f"--api-versions={api}" for api in SERVED)], capture_output=True, text=True, timeout=120
    )
    refusal = clean_error(helm.stderr) if helm.returncode else ""
    report = pipeline.check_loaded(loader.load(file), pipeline.Options(render=False))
    errors = [
        f"{f.rule} {f.path}: {f.message}"
        for f in report.findings
        if f.severity == "error" and f.rule != "schema.stale-copy"
    ]
    assert (not errors) == (not refusal), (
        f"Helm 3: {refusal or 'rendered'}\nkvtier validate: {errors or 'accepted'}"
    )
