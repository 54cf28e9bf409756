"""Every helm-unittest assertion type, with its verdict rules (including `not` and empty selections).

Each validator takes the assertion's parameters and a Context (all documents of one template, the
selected ones, whether the assertion is negated, the render error) and returns (passed, failure lines).
"""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kvtier.unittest_plugin import messages as msg
from kvtier.unittest_plugin.govalues import go_equal, go_type_name, is_go_string
from kvtier.unittest_plugin.yamlpath import PathError, find

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


def _normalize(value: Any) -> Any:
    if is_go_string(value):
        return uniform(value)
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    return value


def _values(manifest: dict[str, Any], path: str) -> list[Any]:
    return find(manifest, path)


def _per_manifest(
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


def _per_value(
    ctx: Context,
    manifest: dict[str, Any],
    i: int,
    path: str,
    check: Callable[[Any, int], Result],
    quoted: bool = False,
) -> Result:
    try:
        actuals = _values(manifest, path)
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
            actual = _normalize(actual)
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

    return _per_manifest(
        ctx,
        lambda m, i: _per_value(ctx, m, i, path, lambda a, j: check(a, j, i)),
        lambda: msg.info(
            -1, -1, path=path, label=" to equal", expected=msg.yaml_text(expected), actual="no manifest found"
        ),
    )


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

    return _per_manifest(
        ctx, check, lambda: msg.info(-1, -1, label=" to equal", expected=msg.yaml_text(expected))
    )


def exists(params: Any, ctx: Context) -> Result:
    path = param(params, "path", "")

    def check(manifest: dict[str, Any], i: int) -> Result:
        try:
            found = bool(_values(manifest, path))
        except PathError as err:
            return False, msg.error(i, -1, str(err))
        if found == ctx.negative:
            return False, [
                f"DocumentIndex:\t{i}",
                f"Path:\t{path} expected to {'NOT ' if ctx.negative else ''}exists",
            ]
        return True, []

    return _per_manifest(ctx, check, lambda: [f"Path:\t{path} expected to exists"])


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

    return _per_manifest(
        ctx,
        lambda m, i: _per_value(ctx, m, i, path, lambda a, j: check(a, j, i)),
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

    return _per_manifest(
        ctx,
        lambda m, i: _per_value(ctx, m, i, path, lambda a, j: check(a, j, i)),
        lambda: msg.info(-1, -1, path=path, label=" to match", expected=pattern, actual="no manifest found"),
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

    return _per_manifest(
        ctx, check, lambda: msg.info(-1, -1, label=" to match", expected=pattern, actual="no manifest found")
    )


def _subset(actual: dict[Any, Any], content: dict[Any, Any]) -> bool:
    return all(go_equal(actual.get(k), v) for k, v in content.items())


def contains(params: Any, ctx: Context) -> Result:
    path, content = param(params, "path", ""), param(params, "content")
    count, any_ = param(params, "count"), param(params, "any", False) is True

    def found_in(items: list[Any]) -> tuple[bool, int]:
        n = 0
        for item in items:
            if any_ and isinstance(item, dict) and isinstance(content, dict):
                n += _subset(item, content)
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

    return _per_manifest(
        ctx,
        lambda m, i: _per_value(ctx, m, i, path, lambda a, j: check(a, j, i)),
        lambda: fail("no manifest found", 0, -1),
    )


def is_subset(params: Any, ctx: Context) -> Result:
    path, content = param(params, "path", ""), param(params, "content")

    def check(actual: Any, j: int, i: int) -> Result:
        if isinstance(actual, dict) and isinstance(content, dict):
            found = _subset(actual, content)
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

    return _per_manifest(
        ctx,
        lambda m, i: _per_value(ctx, m, i, path, lambda a, j: check(a, j, i)),
        lambda: msg.info(
            -1,
            -1,
            path=path,
            label=" to contain",
            expected=msg.yaml_text(content),
            actual="no manifest found",
        ),
    )


def _field_is(field: str, label: str) -> Callable[[Any, Context], Result]:
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

        return _per_manifest(
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

    return _per_manifest(ctx, check, lambda: fail("", "", "no manifest found", -1))


def _operator(kind: str) -> Callable[[Any, Context], Result]:
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

        return _per_manifest(
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

    return _per_manifest(
        ctx,
        lambda m, i: _per_value(ctx, m, i, path, lambda a, j: check(a, j, i)),
        lambda: msg.info(
            -1, -1, path=path, label=" to be of type", expected=str(want), actual="no manifest found"
        ),
    )


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


def _swap(compare: Callable[[Any, int, int], Result], i: int, actual: Any, j: int) -> Result:
    return compare(actual, i, j)


def _snapshot(raw: bool) -> Callable[[Any, Context], Result]:
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
                passed, lines = _per_value(ctx, m, i, path, functools.partial(_swap, compare, i))
            errors += lines
            ok = passed if i == 0 else ok and passed
        return ok, errors

    return validate


# name -> (validator, antonym, requires a successful render)
VALIDATORS: dict[str, tuple[Callable[[Any, Context], Result], bool, bool]] = {
    "matchSnapshot": (_snapshot(False), False, True),
    "matchSnapshotRaw": (_snapshot(True), False, True),
    "equal": (equal, False, True),
    "notEqual": (equal, True, True),
    "greaterOrEqual": (_operator("greater"), False, True),
    "notGreaterOrEqual": (_operator("greater"), True, True),
    "lessOrEqual": (_operator("less"), False, True),
    "notLessOrEqual": (_operator("less"), True, True),
    "equalRaw": (equal_raw, False, True),
    "notEqualRaw": (equal_raw, True, True),
    "exists": (exists, False, True),
    "notExists": (exists, True, True),
    "isNull": (exists, True, True),
    "isNotNull": (exists, False, True),
    "matchRegex": (match_regex, False, True),
    "notMatchRegex": (match_regex, True, True),
    "matchRegexRaw": (match_regex_raw, False, True),
    "notMatchRegexRaw": (match_regex_raw, True, True),
    "contains": (contains, False, True),
    "notContains": (contains, True, True),
    "isKind": (_field_is("kind", " to be kind"), False, True),
    "isAPIVersion": (_field_is("apiVersion", " to be apiVersion"), False, True),
    "hasDocuments": (has_documents, False, True),
    "isSubset": (is_subset, False, True),
    "isNotSubset": (is_subset, True, True),
    "isNullOrEmpty": (null_or_empty, False, True),
    "isNotNullOrEmpty": (null_or_empty, True, True),
    "isEmpty": (null_or_empty, False, True),
    "isNotEmpty": (null_or_empty, True, True),
    "failedTemplate": (failed_template, False, False),
    "notFailedTemplate": (failed_template, True, True),
    "containsDocument": (contains_document, False, True),
    "lengthEqual": (length_equal, False, True),
    "notLengthEqual": (length_equal, True, True),
    "isType": (is_type, False, True),
    "isNotType": (is_type, True, True),
}
