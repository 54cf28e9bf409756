"""Assertions on values found through a path: equal, exists, isNullOrEmpty, matchRegex, contains,
isSubset, lengthEqual, greaterOrEqual/lessOrEqual, isType (and their negations)."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Any

from pytest_helm_unittest import messages as msg
from pytest_helm_unittest.checks import (
    Context,
    Result,
    normalize,
    param,
    per_manifest,
    per_value,
    subset,
    uniform,
    values_at,
)
from pytest_helm_unittest.govalues import go_equal, go_type_name, is_go_string
from pytest_helm_unittest.yamlpath import PathError, find


def equal(params: Any, ctx: Context) -> Result:
    path, expected = param(params, "path", ""), param(params, "value")
    decode = param(params, "decodeBase64", False) is True

    def check(actual: Any, j: int, i: int) -> Result:
        if is_go_string(actual):
            if decode:
                try:
                    actual = base64.b64decode(actual, validate=True).decode()
                except Exception:
                    return False, msg.error(i, j, f"unable to decode base64 expected content {actual}")
            actual = uniform(actual)
        else:
            actual = normalize(actual)
        if go_equal(expected, actual) == ctx.negative:
            exp, act = msg.yaml_text(expected), msg.yaml_text(actual)
            if ctx.negative:
                return False, msg.info(i, j, path=path, label=" to equal", negate=True, expected=exp)
            diff = msg.unified_diff(exp, act)
            lines = msg.info(i, j, path=path, label=" to equal", expected=exp, actual=act, diff=diff)
            if exp == act:  # same text, different Go types (e.g. 2 vs 2.0): say so, helm-unittest does not
                kinds = (go_type_name(expected) or "nil", go_type_name(actual) or "nil")
                lines.append(f"Types:\texpected {kinds[0]}, actual {kinds[1]}")
            return False, lines
        return True, []

    return per_manifest(
        ctx,
        lambda m, i: per_value(ctx, m, i, path, lambda a, j: check(a, j, i)),
        lambda: msg.info(
            -1, -1, path=path, label=" to equal", expected=msg.yaml_text(expected), actual="no manifest found"
        ),
    )


def exists(params: Any, ctx: Context) -> Result:
    path = param(params, "path", "")

    def check(manifest: dict[str, Any], i: int) -> Result:
        try:
            found = bool(values_at(manifest, path))
        except PathError as err:
            return False, msg.error(i, -1, str(err))
        if found == ctx.negative:
            return False, [
                f"DocumentIndex:\t{i}",
                f"Path:\t{path} expected to {'NOT ' if ctx.negative else ''}exists",
            ]
        return True, []

    return per_manifest(ctx, check, lambda: [f"Path:\t{path} expected to exists"])


def null_or_empty(params: Any, ctx: Context) -> Result:
    path = param(params, "path", "")

    def check(actual: Any, j: int, i: int) -> Result:
        empty = not actual  # nil, "", 0, 0.0, false, empty map or list (NaN is not empty)
        if empty == ctx.negative:
            return False, msg.info(
                i,
                j,
                path=path,
                label=" to be null or empty, got",
                negate=ctx.negative,
                expected=msg.yaml_text(actual),
            )
        return True, []

    return per_manifest(
        ctx,
        lambda m, i: per_value(ctx, m, i, path, lambda a, j: check(a, j, i)),
        lambda: msg.info(-1, -1, path=path, label=" to be null or empty, got", expected="no manifest found"),
    )


def match_regex(params: Any, ctx: Context) -> Result:
    path, pattern = param(params, "path", ""), param(params, "pattern", "")
    decode = param(params, "decodeBase64", False) is True
    if not pattern:
        return False, msg.error(-1, -1, "expected field 'pattern' to be filled")
    try:
        regex = re.compile(pattern)
    except re.error as err:
        return False, msg.error(-1, -1, f"invalid regular expression {pattern!r}: {err}")

    def check(actual: Any, j: int, i: int) -> Result:
        if not is_go_string(actual):
            return False, msg.error(i, j, f"{path} is not a string: {msg.yaml_text(actual)}")
        if decode:
            try:
                actual = base64.b64decode(actual, validate=True).decode()
            except Exception:
                return False, msg.error(i, j, f"unable to decode base64 expected content {actual}")
        if (regex.search(actual) is not None) == ctx.negative:
            return False, msg.info(
                i, j, path=path, label=" to match", negate=ctx.negative, expected=pattern, actual=actual
            )
        return True, []

    return per_manifest(
        ctx,
        lambda m, i: per_value(ctx, m, i, path, lambda a, j: check(a, j, i)),
        lambda: msg.info(-1, -1, path=path, label=" to match", expected=pattern, actual="no manifest found"),
    )


def contains(params: Any, ctx: Context) -> Result:
    path, content = param(params, "path", ""), param(params, "content")
    count, any_ = param(params, "count"), param(params, "any", False) is True

    def found_in(items: list[Any]) -> tuple[bool, int]:
        n = 0
        for item in items:
            if any_ and isinstance(item, dict) and isinstance(content, dict):
                n += subset(item, content)
            elif (not any_ or not (isinstance(item, dict) and isinstance(content, dict))) and go_equal(
                item, content
            ):
                n += 1
        return n > 0, n

    def fail(actual: Any, i: int, j: int) -> list[str]:
        return msg.info(
            i,
            j,
            path=path,
            label=" to contain",
            negate=ctx.negative,
            expected=msg.yaml_text([content]),
            actual=msg.yaml_text(actual),
        )

    def check(actual: Any, j: int, i: int) -> Result:
        if not isinstance(actual, list):
            return False, msg.error(i, j, f"expect '{path}' to be an array, got:\n{msg.yaml_text(actual)}")
        found, n = found_in(actual)
        if count is None and found == ctx.negative:
            return False, fail(actual, i, j)
        if count is not None and (found and n == count) == ctx.negative:
            if not found:
                return False, fail(actual, i, j)
            text = f"expect count {count} in '{path}' to be in array, got {n}:\n{msg.yaml_text(actual)}"
            return False, msg.error(i, j, text)
        return True, []

    return per_manifest(
        ctx,
        lambda m, i: per_value(ctx, m, i, path, lambda a, j: check(a, j, i)),
        lambda: fail("no manifest found", 0, -1),
    )


def is_subset(params: Any, ctx: Context) -> Result:
    path, content = param(params, "path", ""), param(params, "content")

    def check(actual: Any, j: int, i: int) -> Result:
        if isinstance(actual, dict) and isinstance(content, dict):
            found = subset(actual, content)
            if found == ctx.negative:
                return False, msg.info(
                    i,
                    j,
                    path=path,
                    label=" to contain",
                    negate=ctx.negative,
                    expected=msg.yaml_text(content),
                    actual=msg.yaml_text(actual),
                )
            return True, []
        return False, msg.error(i, j, f"expect '{path}' to be an object, got:\n{msg.yaml_text(actual)}")

    return per_manifest(
        ctx,
        lambda m, i: per_value(ctx, m, i, path, lambda a, j: check(a, j, i)),
        lambda: msg.info(
            -1,
            -1,
            path=path,
            label=" to contain",
            expected=msg.yaml_text(content),
            actual="no manifest found",
        ),
    )


def length_equal(params: Any, ctx: Context) -> Result:
    paths, path, count = param(params, "paths") or [], param(params, "path", "") or "", param(params, "count")
    if path and (count is None or count < 0):
        return False, msg.error(-1, -1, "'count' field must be set if 'path' is used")
    if path and paths:
        return False, msg.error(-1, -1, "'paths' couldn't be used with 'path'")

    def fail(p: str, want: str, got: str, i: int) -> list[str]:
        return msg.info(
            i, -1, path=p, label=" to match count", negate=ctx.negative, expected=want, actual=got
        )

    def single(m: dict[str, Any], p: str, i: int) -> tuple[bool, list[str], int]:
        try:
            actuals = find(m, p)
        except PathError as err:
            return False, msg.error(i, -1, str(err)), 0
        ok, errors, length = not actuals and ctx.negative, [], 0
        for j, actual in enumerate(actuals):
            if not isinstance(actual, list) and count is None:
                errors += msg.error(i, j, f"{p} is not array")
                continue
            length = len(actual) if isinstance(actual, list) else 0
            passed = True
            if count is not None and (length == count) == ctx.negative:
                errors += fail(p, str(count), str(length), i)
                passed = False
            ok = passed if j == 0 else ok and passed
        return ok, errors, length

    def check(m: dict[str, Any], i: int) -> Result:
        if path:
            ok, errors, _ = single(m, path, i)
            return ok, errors
        errors, lengths, all_ok = [], {}, True
        for p in paths:
            ok, lines, lengths[p] = single(m, p, i)
            if not ok:
                errors += lines
                all_ok = False
        if not all_ok:
            return False, errors
        first = None
        for p in sorted(lengths):
            if first is None:
                first = lengths[p]
            elif (first == lengths[p]) == ctx.negative:
                return False, errors + fail(p, "-1", str(lengths[p]), i)
        return True, errors

    return per_manifest(ctx, check, lambda: fail("", "", "no manifest found", -1))


def operator_check(kind: str) -> Callable[[Any, Context], Result]:
    def validate(params: Any, ctx: Context) -> Result:
        path, expected = param(params, "path", ""), param(params, "value")
        label = f" to be {kind} then or equal to, got"

        def compare(actual: Any) -> bool:
            # The Go source reads `A || B == negative` as `A || (B == negative)`; kept for identical verdicts.
            neg = not ctx.negative
            greater = kind == "greater" and actual >= expected
            less = kind == "less" and actual <= expected
            return greater or (less == neg)

        def check(m: dict[str, Any], i: int) -> Result:
            try:
                actuals = find(m, path)
            except PathError as err:
                return False, msg.error(i, -1, str(err))
            if not actuals and not ctx.negative:
                return False, msg.error(i, -1, f"unknown path '{path}'")
            ok, errors = not actuals and ctx.negative, []
            for j, actual in enumerate(actuals):
                if go_type_name(actual) != go_type_name(expected):
                    errors += msg.error(
                        i,
                        j,
                        f"actual '{go_type_name(actual) or '<nil>'}' and expected "
                        f"'{go_type_name(expected) or '<nil>'}' types do not match",
                    )
                    continue
                if not isinstance(expected, (str, int, float)) or isinstance(expected, bool):
                    passed, lines = False, [f"unsupported type '{go_type_name(expected)}'"]
                else:
                    passed = compare(actual)
                    lines = (
                        []
                        if passed
                        else [f"the actual '{actual}' is not {kind} or equal to the expected '{expected}'"]
                    )
                if lines:
                    errors += msg.info(i, j, path=path, label=label, negate=ctx.negative, expected=lines[0])
                ok = passed if j == 0 else ok and passed
            return ok, errors

        return per_manifest(
            ctx, check, lambda: msg.info(-1, -1, path=path, label=label, expected="no manifests found")
        )

    return validate


def is_type(params: Any, ctx: Context) -> Result:
    path, want = param(params, "path", ""), param(params, "type", "")

    def check(actual: Any, j: int, i: int) -> Result:
        got = go_type_name(actual)
        if (got == want) == ctx.negative:
            return False, msg.info(
                i, j, path=path, label=" to be of type", negate=ctx.negative, expected=str(want), actual=got
            )
        return True, []

    return per_manifest(
        ctx,
        lambda m, i: per_value(ctx, m, i, path, lambda a, j: check(a, j, i)),
        lambda: msg.info(
            -1, -1, path=path, label=" to be of type", expected=str(want), actual="no manifest found"
        ),
    )
