"""Where a value of the effective values comes from: the user's files (with line and column) or a
chart's values.yaml, so a finding on a merged value points at the key to change.

A key path of .Values can come from, highest priority first: each user layer (the last -f file first),
the chart's values.yaml; under a subchart's name, then that subchart's values.yaml; under
`<subchart>.global`, the parent's `global` before all of those (merge.py has Helm's order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from kvtier import paths
from kvtier.validate.inputs import loader, merge
from kvtier.validate.inputs.loader import KeyPath, Loaded, format_path
from kvtier.values import lookup

ABSENT = object()


@dataclass(frozen=True)
class Spot:
    """A finding's position, and a note for its message when the value is not the user's own."""

    file: str
    line: int | None = None
    column: int | None = None
    note: str = ""


def value_at(data: Any, path: KeyPath) -> Any:
    """The value at a key path, or ABSENT (a null is a value)."""
    return lookup(data, *path, default=ABSENT)


def shown(path: Path) -> str:
    """A chart file as the user finds it: relative to the bundle's root when inside it."""
    try:
        return str(path.resolve().relative_to(paths.ROOT))
    except ValueError:
        return str(path)


@cache
def _chart_values(path: Path) -> Loaded:
    """A chart's values.yaml with positions (read only when a finding lands on a chart default)."""
    return loader.load(path)


@dataclass(frozen=True)
class _Source:
    """A user layer, or a chart's values.yaml."""

    loaded: Loaded | None = None
    chart_file: Path | None = None

    def file(self) -> Loaded:
        if self.loaded is not None:
            return self.loaded
        assert self.chart_file is not None
        return _chart_values(self.chart_file)

    def holds(self, at: KeyPath) -> bool | None:
        """True: the value at `at` is written here. None: a list, a scalar or a null written above it
        replaces whatever the layers below hold there. False: only mappings above it, so a layer below
        can supply it."""
        node, under_list = self.file().data, False
        for part in at:
            if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                node, under_list = node[part], True
            elif isinstance(node, dict) and part in node:
                node = node[part]
            else:
                return False if isinstance(node, dict) and not under_list else None
        return True

    def name(self) -> str:
        return str(self.loaded.path) if self.loaded is not None else shown(self.file().path)


def _chart_source(chart: merge.Chart) -> list[tuple[_Source, KeyPath]]:
    return [(_Source(chart_file=chart.values_file), ())] if chart.values_file else []


class Origins:
    """Positions for key paths of the effective values of `user` (lowest priority first) over `chart`
    (merge.Effective.chart: its enabled dependencies only). Without a chart: the user's layers alone."""

    def __init__(self, user: Sequence[Loaded], chart: merge.Chart | None = None) -> None:
        self.user = list(user)
        self.chart = chart
        layers = [(_Source(loaded=layer), ()) for layer in reversed(self.user)]
        self._top: list[tuple[_Source, KeyPath]] = layers + (_chart_source(chart) if chart else [])

    def _candidates(
        self, chart: merge.Chart | None, layers: list[tuple[_Source, KeyPath]], path: KeyPath
    ) -> list[tuple[_Source, KeyPath]]:
        dep = chart.dependency(path[0]) if chart is not None and path else None
        if dep is None:
            return [(source, (*prefix, *path)) for source, prefix in layers]
        below = [(source, (*prefix, path[0])) for source, prefix in layers] + _chart_source(dep.chart)
        found = self._candidates(dep.chart, below, path[1:])
        if path[1:2] == (merge.GLOBAL,):  # the parent's globals win over the subchart's
            return self._candidates(chart, layers, (merge.GLOBAL, *path[2:])) + found
        return found

    def _origin(self, path: KeyPath) -> tuple[_Source, KeyPath] | None:
        """The highest-priority layer that writes the value at `path` (None: no layer does)."""
        for source, at in self._candidates(self.chart, self._top, path):
            held = source.holds(at)
            if held is None:
                return None
            if held:
                return source, at
        return None

    def at(self, path: KeyPath, value: bool = False) -> Spot:
        """Where the value (or, value=False, the key) at `path` of the effective values is written."""
        origin = self._origin(path)
        if origin is None:
            return self._nearest(path)
        source, at = origin
        line, column = source.file().where(at, value=value)
        if source.loaded is not None:  # a --set flag has no lines
            return Spot(source.name(), line, column) if source.loaded.marks else Spot(source.name())
        cause = self._user_ancestor(path[:-1])
        if cause is None:
            note = "the chart's default; none of your values sets it"
        else:
            loaded, prefix = cause
            written = f"{loaded.path}:{loaded.where(prefix)[0]}" if loaded.marks else str(loaded.path)
            note = f"the chart's default, kept under your `{format_path(prefix)}` ({written})"
        return Spot(source.name(), line, column, note)

    def missing(self, path: KeyPath, key: str) -> Spot:
        """Where a key the mapping at `path` lacks went: a user's null that removed the chart's default,
        else the mapping itself."""
        full = (*path, key)
        candidates = self._candidates(self.chart, self._top, full)
        origin = self._origin(full)
        if (
            origin is None
            or origin[0].loaded is None
            or value_at(origin[0].file().data, origin[1]) is not None
        ):
            return self.at(path)
        source, at = origin
        line, column = source.file().where(at, value=True) if source.file().marks else (None, None)
        note = f"`{format_path(full)}: null` removes it"
        for chart, chart_at in candidates:
            if chart.loaded is None and value_at(chart.file().data, chart_at) not in (ABSENT, None):
                note = f"`{format_path(full)}: null` removes the chart's default at "
                note += f"{chart.name()}:{chart.file().where(chart_at)[0]}"
                break
        return Spot(source.name(), line, column, note=note)

    def _user_ancestor(self, path: KeyPath) -> tuple[Loaded, KeyPath] | None:
        """The deepest of `path` and its ancestors a user layer writes (the last file first)."""
        for end in range(len(path), 0, -1):
            for loaded in reversed(self.user):
                if value_at(loaded.data, path[:end]) is not ABSENT:
                    return loaded, path[:end]
        return None

    def _nearest(self, path: KeyPath) -> Spot:
        """A path no source writes whole: its deepest ancestor in a user file, else the chart defaults."""
        cause = self._user_ancestor(path)
        if cause is not None:
            loaded, _ = cause
            return Spot(str(loaded.path), *loaded.where(path)) if loaded.marks else Spot(str(loaded.path))
        return Spot(str(self.user[-1].path) if self.user else "", note="from the chart defaults")
