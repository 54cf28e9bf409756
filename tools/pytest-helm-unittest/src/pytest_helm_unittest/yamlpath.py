"""The path language of helm-unittest assertions (its fork of vmware-labs/yaml-jsonpath).

`metadata.name`, `spec.containers[0].image`, `metadata.labels["app.kubernetes.io/name"]`,
`spec.containers[?(@.name == "app")].ports[*]`, `..image`, slices `[1:3]`, unions `[0,2]`.
A path is evaluated on the manifest after a yaml.v3 encode/decode round trip (so a float with an
integral value comes back as an int), and mappings are walked in yaml.v3's sorted key order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

from pytest_helm_unittest.goemit import sorted_keys
from pytest_helm_unittest.govalues import go_format_float, resolve_plain
from pytest_helm_unittest.yamlfilter import FilterError, compile_filter

Step = Callable[[Any, Any], Iterator[Any]]
_NAME_STOP = set(".[)&|=!><~ ")


class PathError(ValueError):
    """The path does not parse."""


def roundtrip(value: Any) -> Any:
    """The value as yaml.v3 decodes it after encoding it (floats re-resolved from their text)."""
    if isinstance(value, dict):
        return {roundtrip(k): roundtrip(v) for k, v in value.items()}
    if isinstance(value, list):
        return [roundtrip(v) for v in value]
    if isinstance(value, float):
        return resolve_plain(go_format_float(value))[1]
    return value  # strings and time.Time values survive the round trip unchanged


def find(value: Any, path: str) -> list[Any]:
    """Every value the path selects (the value itself for the empty path)."""
    if path == "":
        return [value]
    steps = compile_path(path)
    root = roundtrip(value)
    return list(_run(steps, root, root))


def _run(steps: tuple[Step, ...], node: Any, root: Any) -> Iterator[Any]:
    if not steps:
        yield node
        return
    for child in steps[0](node, root):
        yield from _run(steps[1:], child, root)


def _children(node: Any) -> Iterator[Any]:
    if isinstance(node, dict):
        for key in sorted_keys(node):
            yield node[key]
    elif isinstance(node, list):
        yield from node


def _descend(node: Any) -> Iterator[Any]:
    """Every node below and including this one, children first (keys too, as the Go walker does)."""
    if isinstance(node, dict):
        for key in sorted_keys(node):
            yield key
            yield from _descend(node[key])
    elif isinstance(node, list):
        for item in node:
            yield from _descend(item)
    yield node


def _unescape(raw: str) -> str:
    out, escaped = [], False
    for c in raw:
        if c == "\\":
            if escaped:
                out.append(c)
            escaped = not escaped
            continue
        escaped = False
        out.append(c)
    return "".join(out)


def _child(name: str) -> Step:
    if name == "*":
        return lambda node, root: _children(node)
    name = _unescape(name)

    def step(node: Any, root: Any) -> Iterator[Any]:
        if isinstance(node, dict):
            for key in sorted_keys(node):
                if _key_text(key) == name:
                    yield node[key]
                    return

    return step


def _key_text(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, float):
        return go_format_float(key)
    return "null" if key is None else str(key)


def _bracket_children(names: list[str]) -> Step:
    def step(node: Any, root: Any) -> Iterator[Any]:
        if isinstance(node, dict):
            keys = sorted_keys(node)
            for name in names:
                for key in keys:
                    if _key_text(key) == name:
                        yield node[key]

    return step


def _slice_indices(subscript: str, length: int) -> list[int]:
    union = subscript.split(",")
    if len(union) > 1:
        out: list[int] = []
        for member in union:
            if member.strip() == "*":
                raise PathError("wildcard cannot be used in union")
            out.extend(_slice_indices(member, length))
        return out
    subscript = subscript.strip()
    if subscript == "*":
        return list(range(length))
    parts = subscript.split(":")
    if len(parts) > 3:
        raise PathError("malformed array index, too many colons")
    values: list[int | None] = []
    for part in parts:
        part = part.strip()
        if not part:
            values.append(None)
            continue
        if not re.fullmatch(r"[-+]?[0-9]+", part):
            raise PathError("non-integer array index")
        values.append(int(part))
    if len(parts) == 1:
        if values[0] is None:
            raise PathError("array index missing")
        start = values[0] + length if values[0] < 0 else values[0]
        return [start] if 0 <= start < length else []
    step = values[2] if len(values) == 3 and values[2] is not None else 1
    if step == 0:
        raise PathError("array index step value must be non-zero")
    start = values[0] if values[0] is not None else (0 if step > 0 else length - 1)
    stop = values[1] if values[1] is not None else (length if step > 0 else -1)
    start = start + length if values[0] is not None and start < 0 else start
    stop = stop + length if values[1] is not None and stop < 0 else stop
    if step > 0:
        return [i for i in range(max(start, 0), min(stop, length), step) if 0 <= i < length]
    return [i for i in range(min(start, length), max(stop, -1), step) if 0 <= i < length]


def _subscript(subscript: str) -> Step:
    _slice_indices(subscript, 0)  # syntax check now, as the Go lexer does

    def step(node: Any, root: Any) -> Iterator[Any]:
        if isinstance(node, dict) and subscript.strip() == "*":
            yield from _children(node)
        elif isinstance(node, list):
            for i in _slice_indices(subscript, len(node)):
                yield node[i]

    return step


def _split_names(inner: str) -> list[str]:
    """Quoted, comma-separated names of a bracket child: ['a', "b.c"]."""
    names, i = [], 0
    while i < len(inner):
        while i < len(inner) and inner[i] in " ,":
            i += 1
        if i >= len(inner):
            break
        quote = inner[i]
        j = i + 1
        while j < len(inner) and not (inner[j] == quote and inner[j - 1] != "\\"):
            j += 1
        names.append(_unescape(inner[i + 1 : j]))
        i = j + 1
    return names


def _read_until_bracket_close(path: str, i: int) -> int:
    """Index just past the `]` closing a quoted bracket child starting at path[i] == '['."""
    j = i + 1
    while j < len(path):
        c = path[j]
        if c in "'\"":
            k = j + 1
            while k < len(path) and not (path[k] == c and path[k - 1] != "\\"):
                k += 1
            if k >= len(path):
                raise PathError(f"unmatched {c} in {path!r}")
            j = k + 1
            continue
        if c == "]":
            return j + 1
        j += 1
    raise PathError(f'missing "]" in {path!r}')


def _filter_end(path: str, i: int) -> int:
    """Index of the `)]` ending a filter whose body starts at path[i]."""
    depth, j = 1, i
    while j < len(path):
        c = path[j]
        if c in "'\"" or (c == "/" and _after_regex_op(path, j)):
            k = j + 1
            while k < len(path) and not (path[k] == c and path[k - 1] != "\\"):
                k += 1
            j = k + 1
            continue
        if path.startswith("[?(", j):
            depth += 1
            j += 3
            continue
        if path.startswith(")]", j):
            depth -= 1
            if depth == 0:
                return j
            j += 2
            continue
        j += 1
    raise PathError("missing end of filter")


def _after_regex_op(path: str, j: int) -> bool:
    return path[:j].rstrip().endswith("=~")


@lru_cache(maxsize=1024)
def compile_path(path: str) -> tuple[Step, ...]:
    """Parse a path into steps; raise PathError with the reason when it is malformed."""
    steps: list[Step] = []
    i = 1 if path.startswith("$") else 0
    first = not path.startswith("$")
    while i < len(path):
        if path.startswith("..", i):
            j = i + 2
            while j < len(path) and path[j] not in ".[":
                j += 1
            name = path[i + 2 : j]
            if not name and not path.startswith("[", j):
                raise PathError("child name or array access or filter missing after recursive descent")
            steps.append(lambda node, root: _descend(node))
            if name:
                steps.append(_child(name))
            if path.startswith("[?(", j):
                end = _filter_end(path, j + 3)
                steps.append(_filter_self(_filter(path[j + 3 : end])))
                j = end + 2
            i, first = j, False
            continue
        if path[i] == "." or first:
            j = i + 1 if path[i] == "." else i
            start = j
            stop = _NAME_STOP if path[i] == "." else _NAME_STOP | {"]"}
            while j < len(path) and path[j] not in stop:
                j += 1
            if j == start:
                raise PathError(f"child name missing at position {j}, following {path[:j]!r}")
            if path.startswith("~", j):
                raise PathError("property name operator (~) is not supported by this plugin")
            steps.append(_child(path[start:j]))
            i, first = j, False
            continue
        if path.startswith("[?(", i):
            end = _filter_end(path, i + 3)
            steps.append(_filter_children(_filter(path[i + 3 : end])))
            i = end + 2
            continue
        if re.match(r"\[\s*['\"]", path[i:]):
            j = _read_until_bracket_close(path, i)
            steps.append(_bracket_children(_split_names(path[i + 1 : j - 1].strip())))
            i = j
            continue
        if path[i] == "[":
            j = path.find("]", i)
            if j < 0:
                raise PathError(f"unmatched [ at position {len(path)}")
            if j == i + 1:
                raise PathError(f"subscript missing from [] before position {j + 1}")
            try:
                steps.append(_subscript(path[i + 1 : j]))
            except PathError as err:
                raise PathError(
                    f"invalid array index {path[i : j + 1]} before position {j + 1}: {err}"
                ) from None
            i = j + 1
            continue
        raise PathError(f"invalid path syntax at position {i}, following {path[:i]!r}")
    return tuple(steps)


def _filter_children(pred: Callable[[Any, Any], bool]) -> Step:
    def step(node: Any, root: Any) -> Iterator[Any]:
        if isinstance(node, list):
            yield from (c for c in node if pred(c, root))
        elif pred(node, root):
            yield node

    return step


def _filter_self(pred: Callable[[Any, Any], bool]) -> Step:
    return lambda node, root: iter([node] if pred(node, root) else [])


def _subpath(sub: str, from_root: bool) -> Callable[[Any, Any], list[Any]]:
    """A filter operand: the values of a relative (`@`) or absolute (`$`) path."""
    steps = compile_path(sub) if sub else ()
    return lambda node, root: list(_run(steps, root if from_root else node, root))


def _filter(text: str) -> Callable[[Any, Any], bool]:
    try:
        return compile_filter(text, _subpath)
    except FilterError as error:
        raise PathError(str(error)) from None
