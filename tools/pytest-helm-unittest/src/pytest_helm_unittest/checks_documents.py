"""Assertions on whole documents and raw output: equalRaw, matchRegexRaw, isKind, isAPIVersion,
hasDocuments, containsDocument, failedTemplate, matchSnapshot, matchSnapshotRaw."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from pytest_helm_unittest import messages as msg
from pytest_helm_unittest.checks import Context, Result, msg_str, param, per_manifest, per_value, uniform
from pytest_helm_unittest.govalues import go_equal, is_go_string
from pytest_helm_unittest.yamlpath import find


def equal_raw(params: Any, ctx: Context) -> Result:
    expected = param(params, "value", "")

    def check(manifest: dict[str, Any], i: int) -> Result:
        actual = uniform(manifest.get("raw"))
        if go_equal(expected, actual) == ctx.negative:
            return False, msg.info(
                -1,
                -1,
                label=" to equal",
                negate=ctx.negative,
                expected=msg.yaml_text(expected),
                actual=None if ctx.negative else msg.yaml_text(actual),
            )
        return True, []

    return per_manifest(
        ctx, check, lambda: msg.info(-1, -1, label=" to equal", expected=msg.yaml_text(expected))
    )


def match_regex_raw(params: Any, ctx: Context) -> Result:
    pattern = param(params, "pattern", "")
    if not pattern:
        return False, msg.error(-1, -1, "expected field 'pattern' to be filled")
    regex = re.compile(pattern)

    def check(manifest: dict[str, Any], i: int) -> Result:
        actual = uniform(manifest.get("raw"))
        if (regex.search(actual) is not None) == ctx.negative:
            return False, msg.info(
                -1, -1, label=" to match", negate=ctx.negative, expected=pattern, actual=actual
            )
        return True, []

    return per_manifest(
        ctx, check, lambda: msg.info(-1, -1, label=" to match", expected=pattern, actual="no manifest found")
    )


def field_is(field: str, label: str) -> Callable[[Any, Context], Result]:
    def validate(params: Any, ctx: Context) -> Result:
        want = param(params, "of", "")

        def check(manifest: dict[str, Any], i: int) -> Result:
            value = manifest.get(field)
            if (is_go_string(value) and value == want) == ctx.negative:
                return False, msg.info(
                    i,
                    -1,
                    label=label,
                    negate=ctx.negative,
                    expected=str(want),
                    actual=None if ctx.negative else msg.yaml_text(value),
                )
            return True, []

        return per_manifest(
            ctx, check, lambda: msg.info(-1, -1, label=label, expected=str(want), actual="no manifest found")
        )

    return validate


def has_documents(params: Any, ctx: Context) -> Result:
    count = param(params, "count", 0)
    n = len(ctx.selected) if param(params, "filterAware", False) is True else len(ctx.docs)
    if (n == count) != ctx.negative:
        return True, []
    return False, msg.info(
        -1,
        -1,
        label=" documents count to be",
        negate=ctx.negative,
        expected=str(count),
        actual=None if ctx.negative else str(n),
    )


def contains_document(params: Any, ctx: Context) -> Result:
    kind, api = param(params, "kind", ""), param(params, "apiVersion", "")
    name, namespace = param(params, "name", ""), param(params, "namespace", "")
    any_ = param(params, "any", False) is True
    label = (
        f"Kind = {kind}, apiVersion = {api}"
        + (f", Name = {name}" if name else "")
        + (f", Namespace = {namespace}" if namespace else "")
    )

    def matches(m: dict[str, Any]) -> bool:
        if isinstance(m.get("kind"), str) and m["kind"] != kind:
            return False
        if isinstance(m.get("apiVersion"), str) and m["apiVersion"] != api:
            return False
        for want, path in ((name, "metadata.name"), (namespace, "metadata.namespace")):
            if want:
                got = find(m, path)
                if not got or not go_equal(got[0], want):
                    return False
        return True

    ok, errors = False, []
    for i, m in enumerate(ctx.selected):
        passed = matches(m)
        if passed == ctx.negative:
            passed = False
            errors += msg.info(i, -1, label=" to contain document", negate=ctx.negative, expected=label)
        else:
            passed = True
            if any_ != ctx.negative:
                ok, errors = True, []
                break
        ok = passed if i == 0 else ok and passed
    if not ctx.selected:
        if ctx.negative:
            return True, errors
        return False, errors + msg.info(0, -1, label=" to contain document", expected=label)
    return ok, errors


def failed_template(params: Any, ctx: Context) -> Result:
    message, pattern = param(params, "errorMessage", "") or "", param(params, "errorPattern", "") or ""
    if message and pattern:
        return False, msg.error(
            -1, -1, "single attribute 'errorMessage' or 'errorPattern' supported at the same time"
        )
    label = " to match" if pattern else " to equal"

    def fail(actual: Any) -> list[str]:
        return msg.info(
            -1,
            -1,
            label=label,
            negate=ctx.negative,
            expected=message or pattern,
            actual=None if ctx.negative else msg_str(actual),
        )

    def check_one(actual: Any) -> Result:
        if pattern:
            try:
                regex = re.compile(pattern)
            except re.error:
                regex = re.compile(re.escape(pattern))
            if actual is not None and (regex.search(actual) is not None) == ctx.negative:
                if re.search(r"[\\.+*?()|\[\]{}^$]", pattern):
                    if (re.search(re.escape(pattern), actual) is not None) == ctx.negative:
                        return False, fail(actual)
                    return True, []
                return False, fail(actual)
            return True, []
        if message:
            if (actual is not None and message == actual) == ctx.negative:
                return False, fail(actual)
            return True, []
        return True, []

    if ctx.render_error is not None:
        return check_one(ctx.render_error)
    ok, errors = True, []
    for i, m in enumerate(ctx.selected):
        if not message and not pattern and not ctx.negative:
            continue
        passed, lines = check_one(m.get("raw"))
        errors += lines
        ok = passed if i == 0 else ok and passed
    if not ctx.selected and not ctx.negative:
        return False, errors + fail("No failed document")
    return ok, errors


def swap_indexes(compare: Callable[[Any, int, int], Result], i: int, actual: Any, j: int) -> Result:
    return compare(actual, i, j)


def snapshot_check(raw: bool) -> Callable[[Any, Context], Result]:
    def validate(params: Any, ctx: Context) -> Result:
        path = "" if raw else param(params, "path", "")
        match = (param(param(params, "matchRegex"), "pattern") or "") if not raw else ""
        not_match = (param(param(params, "notMatchRegex"), "pattern") or "") if not raw else ""

        def compare(content: Any, i: int, j: int) -> Result:
            res = ctx.snapshot(content, match=match, not_match=not_match)
            if res.passed == ctx.negative:
                shown = res.cached if ctx.negative else msg.unified_diff(res.cached, res.new)
                if res.message:
                    return False, msg.info(i, j, label=res.message, negate=ctx.negative, expected=res.cached)
                return False, msg.info(
                    i,
                    j,
                    path=None if raw else path,
                    label=f" to match snapshot {res.index}",
                    negate=ctx.negative,
                    expected=shown,
                )
            return True, []

        ok, errors = not ctx.selected and not ctx.negative, []
        for i, m in enumerate(ctx.selected):
            if raw:
                passed, lines = compare(uniform(m.get("raw")), -1, -1)
            else:
                passed, lines = per_value(ctx, m, i, path, functools.partial(swap_indexes, compare, i))
            errors += lines
            ok = passed if i == 0 else ok and passed
        return ok, errors

    return validate
