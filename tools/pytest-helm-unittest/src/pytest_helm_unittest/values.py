"""User values of one test, merged as helm-unittest does: suite values files, test values files,
suite `set`, test `set` (later wins, maps merge, lists replace), scoped under the subchart route."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from pytest_helm_unittest import govalues


class ValuesError(ValueError):
    """A values file or a `set` path the test names is unusable."""


def merge(new: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """Helm's MergeTables(new, base): keys of `new` win, nested maps merge."""
    out = dict(base)
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(value, out[key])
        else:
            out[key] = value
    return out


def scope(routes: list[str], values: dict[str, Any]) -> dict[str, Any]:
    """Nest values under each subchart name of the route, keeping `global` at every level."""
    while len(routes) > 1:
        wrapped: dict[str, Any] = {}
        if "global" in values:
            wrapped["global"] = values["global"]
        wrapped[routes[-1]] = values
        values, routes = wrapped, routes[:-1]
    return values


def routes_of(chart_route: str) -> list[str]:
    parts = chart_route.split("/")
    return [parts[i * 2] for i in range(len(parts) // 2 + 1)]


_TOKEN = re.compile(r"\[([^\]]*)\]|([^.\[\]]+)|(\.)")


def set_path(path: str, value: Any) -> dict[str, Any]:
    """`a.b[0].c` -> {"a": {"b": [{"c": value}]}}; `a.[x.y]` escapes a key with dots."""
    if not path:
        raise ValuesError("set path is empty")
    cursors: list[str | int] = []
    i, expect_key = 0, True
    while i < len(path):
        c = path[i]
        if c == "." and not expect_key:
            expect_key, i = True, i + 1
            continue
        if c == "[":
            end = path.find("]", i)
            if end < 0:
                raise ValuesError(f"missing ']' in set path {path!r}")
            inner = path[i + 1 : end]
            if expect_key:
                cursors.append(inner)  # `.[a.b]` escaped key
            elif re.fullmatch(r"[0-9]+", inner):
                cursors.append(int(inner))
            else:
                raise ValuesError(f"invalid index {inner!r} in set path {path!r}")
            expect_key, i = False, end + 1
            continue
        end = i
        while end < len(path) and path[end] not in ".[":
            end += 1
        if any(ch in path[i:end] for ch in ",{}=]"):
            raise ValuesError(f"invalid token in set path {path!r}")
        cursors.append(path[i:end])
        expect_key, i = False, end
    if expect_key:
        raise ValuesError(f"set path {path!r} ends with '.'")
    root: dict[str, Any] = {}
    current: Any = root
    for depth, cursor in enumerate(cursors):
        last = depth == len(cursors) - 1
        nxt = cursors[depth + 1] if not last else None
        child: Any = copy.deepcopy(value) if last else ([None] * (nxt + 1) if isinstance(nxt, int) else {})
        current[cursor] = child
        current = child
    return root


def user_values(
    suite_file: Path, files: list[str], global_set: dict[str, Any], test_set: dict[str, Any], chart_route: str
) -> dict[str, Any]:
    routes = routes_of(chart_route)
    base: dict[str, Any] = {}
    for name in files:
        path = Path(name) if Path(name).is_absolute() else suite_file.parent / name
        try:
            loaded = govalues.load(path.read_text()) or {}
        except OSError as err:
            raise ValuesError(f"values file {name!r} (from {suite_file}): {err.strerror}") from None
        except Exception as err:
            raise ValuesError(f"failed to parse {name}: {err}") from None
        if not isinstance(loaded, dict):
            raise ValuesError(f"values file {name!r} must hold a mapping")
        base = merge(scope(routes, loaded), base)
    for sets in (global_set, test_set):
        for key, value in sets.items():
            base = merge(scope(routes, set_path(str(key), value)), base)
    return base
