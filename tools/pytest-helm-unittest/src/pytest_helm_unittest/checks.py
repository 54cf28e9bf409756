"""What every assertion check shares: the context it runs in, parameter lookup, helm-unittest's
rules for walking documents and path matches (every selected document and every match must pass;
no match fails, or passes when negated)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_helm_unittest import messages as msg
from pytest_helm_unittest.govalues import go_equal, is_go_string
from pytest_helm_unittest.yamlpath import PathError, find

Result = tuple[bool, list[str]]


@dataclass
class Context:
    docs: list[dict[str, Any]]
    selected: list[dict[str, Any]]
    negative: bool
    snapshot: Callable[..., Any]  # (content, match=..., not_match=...) -> SnapshotResult
    render_error: str | None = None


def param(params: Any, name: str, default: Any = None) -> Any:
    """mapstructure-style lookup: field names match case-insensitively."""
    if isinstance(params, dict):
        for key, value in params.items():
            if str(key).lower() == name.lower():
                return value
    return default


def uniform(value: Any) -> str:
    """helm-unittest's uniformContent: spaces before line ends dropped, leading newlines trimmed."""
    text = str(value) if isinstance(value, str) else msg_str(value)
    return re.sub(r"[ ]+\r?\n", "\n", text).lstrip("\n")


def msg_str(value: Any) -> str:
    return "<nil>" if value is None else str(value)


def normalize(value: Any) -> Any:
    if is_go_string(value):
        return uniform(value)
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    return value


def values_at(manifest: dict[str, Any], path: str) -> list[Any]:
    return find(manifest, path)


def per_manifest(
    ctx: Context, check: Callable[[dict[str, Any], int], Result], empty_fail: Callable[[], list[str]]
) -> Result:
    ok, errors = False, []
    for i, manifest in enumerate(ctx.selected):
        passed, lines = check(manifest, i)
        errors += lines
        ok = passed if i == 0 else ok and passed
    if not ctx.selected:
        if ctx.negative:
            return True, errors
        return False, errors + empty_fail()
    return ok, errors


def per_value(
    ctx: Context,
    manifest: dict[str, Any],
    i: int,
    path: str,
    check: Callable[[Any, int], Result],
    quoted: bool = False,
) -> Result:
    try:
        actuals = values_at(manifest, path)
    except PathError as err:
        return False, msg.error(i, -1, str(err))
    if not actuals and not ctx.negative:
        return False, msg.error(i, -1, f"unknown path '{path}'" if quoted else f"unknown path {path}")
    ok, errors = not actuals and ctx.negative, []
    for j, actual in enumerate(actuals):
        passed, lines = check(actual, j)
        errors += lines
        ok = passed if j == 0 else ok and passed
    return ok, errors


def subset(actual: dict[Any, Any], content: dict[Any, Any]) -> bool:
    return all(go_equal(actual.get(k), v) for k, v in content.items())
