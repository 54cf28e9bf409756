"""Values as Helm computes them before it validates the schemas and renders (`helm install`/`template`).

One implementation for the toolkit (validate, plan, preflight). Helm's steps, ported from its behaviour
(Helm 3.22 chartutil, Helm 4 pkg/chart/common/util; measured against both pinned binaries in
tests/charts/test_helm_values.py):

1. The user's layers (each -f file in order, then --set) merge: a mapping merges key by key into the
   one before it; anything else, a null included, replaces (`merge_layers`).
2. Dependencies: every chart's defaults are coalesced with the user's layers to read each dependency's
   `condition` (and `tags`); a disabled one is dropped with its values.yaml and its schema. Then each
   chart's defaults take in its enabled subcharts' values.yaml under their names, with the parent's
   `global` copied into the subchart's (`prepare`).
3. Coalescing (`coalesce_chart`): the user's mapping wins key by key over the chart defaults; lists and
   scalars replace whole; a null removes the chart's default for that key. A null for a key the chart has
   no default for stays a null (the schema then sees it). Under a subchart's key the first pass keeps
   nulls; the subchart's own pass removes the keys its values.yaml defines. A subchart key holding
   anything but a mapping is Helm's error "type mismatch".

Results share unchanged sub-trees with their inputs (no copies): treat them as read-only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from kvtier import helmyaml, paths

UMBRELLA = "kv-tiered-inference"
GLOBAL = "global"
_Loader = helmyaml.Loader  # Helm reads its charts' values.yaml as it reads -f files


class TypeMismatch(ValueError):
    """Helm refuses the values: a subchart's key holds something other than a mapping."""

    def __init__(self, path: tuple[str, ...], found: Any) -> None:
        super().__init__(f"type mismatch on {'.'.join(path)}: a subchart's values must be a mapping")
        self.path = path
        self.found = found


@dataclass(frozen=True)
class Dependency:
    chart: Chart
    condition: str = ""
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Chart:
    name: str  # the name its parent's values use (the alias when there is one)
    chart_name: str  # Chart.yaml's name: the schema source is schema/<chart_name>.values.schema.json
    defaults: dict[str, Any]
    values_file: Path | None = None  # where `defaults` were read (None: no values.yaml)
    dependencies: tuple[Dependency, ...] = field(default=())
    schema_file: Path | None = None  # the chart's values.schema.json, when it has one

    def dependency(self, name: Any) -> Dependency | None:
        return next((d for d in self.dependencies if d.chart.name == name), None)


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data = yaml.load(path.read_text(), Loader=_Loader)
    return data if isinstance(data, dict) else {}


@cache
def load_chart(directory: Path, alias: str = "") -> Chart:
    """A chart directory with its file:// dependencies (what `helm dependency build` packages)."""
    meta = _read(directory / "Chart.yaml")
    deps = []
    for dep in meta.get("dependencies") or []:
        repo = str(dep.get("repository", ""))
        if repo.startswith("file://"):
            sub = load_chart(
                (directory / repo.removeprefix("file://")).resolve(), str(dep.get("alias") or "")
            )
            tags = tuple(str(t) for t in dep.get("tags") or [])
            deps.append(Dependency(sub, str(dep.get("condition") or ""), tags))
    values = directory / "values.yaml"
    name = str(meta.get("name") or directory.name)
    schema = directory / "values.schema.json"
    return Chart(
        alias or name,
        name,
        _keep(_read(values)),
        values if values.is_file() else None,
        tuple(deps),
        schema if schema.is_file() else None,
    )


def umbrella(charts: Path = paths.CHARTS) -> Chart:
    return load_chart(charts / UMBRELLA)


def merge_layers(*layers: dict[str, Any]) -> dict[str, Any]:
    """Helm's merge of -f files (and --set results), later layers winning: mappings merge key by key,
    anything else replaces."""
    out: dict[str, Any] = {}
    for layer in layers:
        out = _merge_two(out, layer)
    return out


def _merge_two(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        below = out.get(key)
        out[key] = _merge_two(below, value) if isinstance(value, dict) and isinstance(below, dict) else value
    return out


def coalesce(base: Any, override: Any, *, keep_nulls: bool = False) -> Any:
    """Helm's coalescing of two tables, `override` winning: mappings merge key by key, anything else is
    replaced, and an override's null removes a key `base` holds a value for (kept with `keep_nulls`)."""
    if not isinstance(base, dict) or not isinstance(override, dict):
        return override
    out = dict(override)
    for key, default in base.items():
        if key not in out:
            out[key] = default
            continue
        mine = out[key]
        if mine is None:
            if not keep_nulls and default is not None:
                del out[key]
        elif isinstance(mine, dict) and isinstance(default, dict):
            out[key] = coalesce(default, mine, keep_nulls=keep_nulls)
    return out


def _coalesce_own(chart: Chart, values: dict[str, Any], keep_nulls: bool) -> dict[str, Any]:
    """One chart's defaults under its values. At the top level a null always removes the key when the
    chart defines it; under a subchart's key nulls are kept for the subchart's own pass."""
    out = dict(values)
    for key, default in chart.defaults.items():
        if key not in out:
            out[key] = default
            continue
        mine = out[key]
        if mine is None:
            if not keep_nulls:
                del out[key]
        elif isinstance(mine, dict) and isinstance(default, dict):
            out[key] = coalesce(default, mine, keep_nulls=keep_nulls or chart.dependency(key) is not None)
    return out


def _with_globals(sub: dict[str, Any], parent: dict[str, Any]) -> dict[str, Any]:
    """The parent's `global` over the subchart's: a parent's key wins, mappings merge."""
    mine, theirs = sub.get(GLOBAL, {}), parent.get(GLOBAL, {})
    if not isinstance(mine, dict) or not isinstance(theirs, dict):
        return sub  # Helm warns and skips the globals
    out = dict(mine)
    for key, value in theirs.items():
        here = out.get(key)
        if isinstance(value, dict):
            if key not in out:
                out[key] = value
            elif isinstance(here, dict):
                out[key] = coalesce(here, value, keep_nulls=True)
        elif not isinstance(here, dict):
            out[key] = value
    return {**sub, GLOBAL: out}


def coalesce_chart(
    chart: Chart, values: dict[str, Any], *, keep_nulls: bool = False, at: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Helm's CoalesceValues: the chart's defaults (and its dependencies', each under its name) under
    `values`. Raises TypeMismatch where Helm stops."""
    out = _coalesce_own(chart, values, keep_nulls)
    for dep in chart.dependencies:
        name = dep.chart.name
        sub = out.get(name, {})
        if not isinstance(sub, dict):
            raise TypeMismatch((*at, name), sub)
        out[name] = coalesce_chart(dep.chart, _with_globals(sub, out), keep_nulls=keep_nulls, at=(*at, name))
    return out


def _lookup(values: dict[str, Any], dotted: str) -> tuple[bool, Any]:
    """Helm's PathValue: (found, value); only a non-mapping at the end of a path of mappings is found."""
    node: Any = values
    *parents, last = dotted.split(".")
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            return False, None
    if not isinstance(node, dict) or last not in node or isinstance(node[last], dict):
        return False, None
    return True, node[last]


def _enabled(dep: Dependency, values: dict[str, Any], prefix: str) -> bool:
    on = True
    tags = values.get("tags")
    if dep.tags and isinstance(tags, dict):
        said = [tags[t] for t in dep.tags if isinstance(tags.get(t), bool)]
        on = True in said or not said
    for condition in (c for c in dep.condition.strip().split(",") if c):
        found, value = _lookup(values, prefix + condition)
        if found and isinstance(value, bool):
            return value  # the first boolean condition decides; a non-boolean one is ignored (Helm warns)
    return on


def _drop_disabled(chart: Chart, values: dict[str, Any], prefix: str = "") -> Chart:
    with_all = coalesce_chart(chart, values)
    kept = [d for d in chart.dependencies if _enabled(d, with_all, prefix)]
    deps = tuple(
        replace(d, chart=_drop_disabled(d.chart, with_all, f"{prefix}{d.chart.name}.")) for d in kept
    )
    return replace(chart, dependencies=deps)


def _with_subchart_defaults(chart: Chart) -> Chart:
    """Each chart's defaults with its subcharts' (theirs first) under their names, nulls kept: what
    Helm's import-values step leaves as the chart's values, import-values or not (none are modelled)."""
    if not chart.dependencies:
        return chart
    deps = tuple(replace(d, chart=_with_subchart_defaults(d.chart)) for d in chart.dependencies)
    chart = replace(chart, dependencies=deps)
    return replace(chart, defaults=coalesce_chart(chart, {}, keep_nulls=True))


def _enabled_names(chart: Chart) -> tuple[Any, ...]:
    return tuple((d.chart.name, _enabled_names(d.chart)) for d in chart.dependencies)


# Prepared charts by (chart, enabled dependencies), kept for the process with the chart they came from.
_prepared: dict[tuple[int, tuple[Any, ...]], tuple[Chart, Chart]] = {}


def prepare(chart: Chart, values: dict[str, Any]) -> Chart:
    """The chart as Helm renders it for these user values: disabled dependencies dropped, the enabled
    subcharts' defaults folded in. Raises TypeMismatch."""
    kept = _drop_disabled(chart, values)
    key = (id(chart), _enabled_names(kept))
    if key not in _prepared:
        prepared = _with_subchart_defaults(kept)
        _keep(prepared.defaults)
        _prepared[key] = (chart, prepared)
    return _prepared[key][1]


# Every mapping and list of the chart defaults this process holds (load_chart's, prepare's), by id. They
# live as long as the process and are never changed, so a check of one (the schema check of a chart
# default the user left alone) holds for as long as the process runs.
_LONG_LIVED: dict[int, Any] = {}


def _keep(tree: Any) -> Any:
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict | list) and id(node) not in _LONG_LIVED:
            _LONG_LIVED[id(node)] = node
            stack.extend(node.values() if isinstance(node, dict) else node)
    return tree


def is_chart_default(node: Any) -> bool:
    """Whether `node` is (the very object of) a chart default: untouched by any user value."""
    return _LONG_LIVED.get(id(node)) is node


@dataclass(frozen=True)
class Effective:
    """What the templates see as .Values, and the chart (enabled dependencies only) it came from."""

    values: dict[str, Any]
    chart: Chart

    def scopes(self) -> list[tuple[tuple[str, ...], Chart, Any]]:
        """(key path, chart, values) of every schema Helm checks: the chart's against all the values,
        each enabled subchart's against the values under its name (skipped when absent or null)."""
        out: list[tuple[tuple[str, ...], Chart, Any]] = []

        def walk(at: tuple[str, ...], chart: Chart, values: Any) -> None:
            out.append((at, chart, values))
            for dep in chart.dependencies if isinstance(values, dict) else ():
                sub = values.get(dep.chart.name)
                if sub is not None:
                    walk((*at, dep.chart.name), dep.chart, sub)

        walk((), self.chart, self.values)
        return out


def compute(values: dict[str, Any], chart: Chart | None = None) -> Effective:
    """The effective values of the user's merged layers. Raises TypeMismatch."""
    chart = chart or umbrella()
    prepared = prepare(chart, values)
    return Effective(coalesce_chart(prepared, values), prepared)


def chart_defaults(charts: Path = paths.CHARTS) -> dict[str, Any]:
    """The umbrella's defaults with its enabled subcharts' under their names (no user values)."""
    return effective({}, charts)


def effective(values: dict[str, Any], charts: Path = paths.CHARTS) -> dict[str, Any]:
    """.Values for one user mapping; where Helm would stop (TypeMismatch), the user's values win."""
    try:
        return compute(values, umbrella(charts)).values
    except TypeMismatch:
        return coalesce(_read(charts / UMBRELLA / "values.yaml"), values)
