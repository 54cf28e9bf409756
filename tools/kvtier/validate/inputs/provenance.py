"""Which values key a rendered field came from, so that a judge of the rendered objects (the Kubernetes
schemas, the API server's dry run, the rules on rendered objects) points at the line the user wrote.

A chart copies values into objects whole (`toYaml .Values.router.affinity`), field by field
(`maxUnavailable: {{ .Values.worker.maxUnavailable }}`) or inside a larger string. So the refused
field and each of its ancestors is looked for in the effective values (the chart defaults merged with
every user file): the deepest rendered node equal to a values node wins; a mapping may also be a values
mapping the chart extended with keys of its own; a scalar must be one the message quotes, or the field's
own value. Among equal candidates: the user's own keys before chart defaults, then keys sharing the
field's names. Nothing found: the finding keeps its rendered path.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from kvtier.validate.findings import Finding
from kvtier.validate.inputs.loader import KeyPath, format_path

_QUOTED = re.compile(r'Invalid value: "((?:[^"\\]|\\.)*)"')
_STEP = re.compile(r"\.?([^.\[\]]+)|\[([^\]]*)\]")
_FIELD_FIRST = re.compile(r"^((?:[A-Za-z_][\w-]*|\[\d+\])(?:\.[\w-]+|\[[^\]]*\])*): (.*)$", re.S)
MIN_SUBSET_LEAVES = 2  # a values mapping of one leaf ({enabled: true}) is too common to claim a field


def steps(field_path: str) -> list[str | int]:
    """`spec.containers[0].name` -> ["spec", "containers", 0, "name"]."""
    out: list[str | int] = []
    for name, index in _STEP.findall(field_path):
        out.append(name if name else int(index) if index.isdigit() else index)
    return out


def at(tree: Any, path: list[str | int]) -> Any:
    """The node at a rendered field path; a name in a list's brackets (`containers[router]`, as the rules
    on rendered objects name containers) is the item whose `name` it is."""
    for step in path:
        if isinstance(tree, list):
            if isinstance(step, str):
                tree = next((i for i in tree if isinstance(i, dict) and i.get("name") == step), None)
            else:
                tree = tree[step] if step < len(tree) else None
        elif isinstance(tree, dict) and step in tree:
            tree = tree[step]
        else:
            return None
    return tree


def _nodes(tree: Any, path: KeyPath = ()) -> Iterator[tuple[KeyPath, Any]]:
    yield path, tree
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _nodes(value, (*path, key))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            yield from _nodes(value, (*path, i))


def _leaf_count(tree: Any) -> int:
    if isinstance(tree, dict):
        return sum(_leaf_count(v) for v in tree.values())
    if isinstance(tree, list):
        return sum(_leaf_count(v) for v in tree)
    return 1


def _inside(small: Any, big: Any) -> bool:
    """Every key of the mapping `small` is in `big` with an equal value (or, for mappings, inside it)."""
    if isinstance(small, dict) and isinstance(big, dict):
        return all(k in big and _inside(v, big[k]) for k, v in small.items())
    return _same(small, big)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, int | float) or isinstance(b, int | float):
        return str(a) == str(b)  # the chart quoted a number, or printed one from a string
    return a == b


def trace(
    field_path: str, message: str, manifest: dict[str, Any], values: Any, user: Any = None
) -> KeyPath | None:
    """The values key whose value became the refused field, or None. `user(key) -> bool` says whether
    a user's file writes the key (preferred over chart defaults)."""
    path = steps(field_path)
    names = {s for s in path if isinstance(s, str)}
    every = list(_nodes(values))

    def best(found: list[KeyPath]) -> KeyPath | None:
        if not found:
            return None
        return max(
            found,
            key=lambda k: (
                bool(user and user(k)),
                bool(k and path and k[-1] == path[-1]),
                len(names & {str(p) for p in k}),
                len(k),
            ),
        )

    quoted = _QUOTED.search(message)
    leaf = at(manifest, path)
    for wanted in ([quoted.group(1)] if quoted else []) + (
        [leaf] if leaf is not None and not isinstance(leaf, dict | list) else []
    ):
        found = [k for k, v in every if not isinstance(v, dict | list) and v is not None and _same(v, wanted)]
        named = [k for k in found if k and ((path and k[-1] == path[-1]) or names & {str(p) for p in k})]
        if named or len(found) == 1:
            return best(named or found)
    for end in range(len(path), 0, -1):
        node = at(manifest, path[:end])
        if not isinstance(node, dict | list) or not node:
            continue
        equal = [k for k, v in every if type(v) is type(node) and v == node]
        if equal:
            return best(equal)
        if isinstance(node, dict):
            extended = [
                k
                for k, v in every
                if isinstance(v, dict) and _leaf_count(v) >= MIN_SUBSET_LEAVES and _inside(v, node)
            ]
            if extended:
                return best(extended)
    return None


def retarget(finding: Finding, manifests: dict[str, dict[str, Any]], values: Any, origins: Any) -> Finding:
    """A finding on a rendered object, pointed at the values key and line that produced the field; the
    rendered field stays in its message. Findings with no rendered field, or none traced, are unchanged."""
    manifest = manifests.get(finding.subject)
    if manifest is None or finding.line is not None:
        return finding
    field_path, message = finding.path, finding.message
    if not field_path:
        match = _FIELD_FIRST.match(finding.message)
        if not match:
            return finding
        field_path, message = match.group(1), match.group(2)
    if field_path.startswith("(") or not steps(field_path):
        return finding

    def user(key: KeyPath) -> bool:
        return not origins.at(key).note

    key = trace(field_path, message, manifest, values, user)
    if not key:
        return finding
    spot = origins.at(key)
    text = finding.message if finding.message.startswith(field_path) else f"{field_path}: {finding.message}"
    return replace(
        finding,
        message=f"{text} ({spot.note})" if spot.note else text,
        file=spot.file,
        line=spot.line,
        column=spot.column,
        path=format_path(key),
    )


_KEY_PATH = re.compile(r"(?<![\w./<])([A-Za-z][\w-]*(?:\.[A-Za-z][\w-]*|\[[^\]\s]+\])+)")


def _resolve(token: str, values: Any) -> list[str | int]:
    """The longest prefix of a written key path that the values hold, a list item by index or by its
    `name` (how the charts name models: `models[qwen2-7b]`)."""
    key: list[str | int] = []
    node = values
    for step in steps(token):
        if isinstance(node, list) and not isinstance(step, int):
            named = [i for i, item in enumerate(node) if isinstance(item, dict) and item.get("name") == step]
            step = named[0] if named else -1
        inside = isinstance(node, dict) and step in node
        if not inside and not (isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node)):
            break
        node = node[step]
        key.append(step)
    return key


def named_key(message: str, values: Any) -> KeyPath | None:
    """The first values key a chart refusal names (`engine.extraEnv: ...`, `<.Values.cache.l2>`): the
    key itself, or the deepest part of it the values hold (a required key that is missing: its parent)."""
    for token in _KEY_PATH.findall(message.replace(".Values.", " ")):
        key = _resolve(token, values)
        if len(key) >= 2:
            return tuple(key)
    return None


def nulled_defaults(origins: Any) -> list[KeyPath]:
    """Keys a user file sets to null over a chart default: Helm deletes the key, default included."""
    out = []
    for layer in origins.user:
        for key, value in _nodes(layer.data):
            if value is None and key and origins.chart is not None:
                default = at(origins.chart.defaults, list(key))
                if default is not None:
                    out.append(key)
    return out


def retarget_refusal(finding: Finding, values: Any, origins: Any) -> Finding:
    """Helm's refusal to render, pointed at the values key it names (a chart rule's key path, else the
    first key its message names); a template error that names none, after a user null deleted a chart
    default, at that null (the likely cause)."""
    key = named_key(finding.path or finding.message, values)
    note = ""
    nulled = nulled_defaults(origins)
    # A refusal that names a key a user's null deleted (`router.image.tag: ... needs a tag`): the values
    # hold only its parent, but the null is the cause, and its line the one to show.
    deleted = [
        n for n in nulled if key is not None and n[: len(key)] == key and format_path(n) in finding.message
    ]
    if key is None or deleted:
        if not nulled:
            return finding
        key = (deleted or nulled)[0]
        note = f"`{format_path(key)}: null` deleted the chart's default, which the templates read"
    spot = origins.missing(key[:-1], str(key[-1])) if note else origins.at(key)
    return replace(
        finding,
        message=f"{finding.message} ({note or spot.note})" if (note or spot.note) else finding.message,
        file=spot.file,
        line=spot.line,
        column=spot.column,
        path=format_path(key),
    )


__all__ = ["at", "named_key", "retarget", "retarget_refusal", "steps", "trace"]
