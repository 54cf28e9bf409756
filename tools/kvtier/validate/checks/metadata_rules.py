"""Label, annotation and toleration syntax, as the API server checks it (apimachinery's validation:
qualified names for keys, label values, label selectors built from node selectors; core validation's
toleration rules).

The property test against the real API server (tests/cluster/test_validate_judges.py) showed these as
the refusals only the server saw: a label key with a space, a value over 63 characters, a node selector
value that starts with a dash, a toleration with operator Exists and a value.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from kvtier.validate.inputs.loader import KeyPath
from kvtier.validate.rules import Hit, ValuesContext, rule
from kvtier.values import keyed

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Mappings whose keys and values become labels or label selectors, and whose keys become annotation keys.
LABEL_MAPS = {"commonLabels", "podLabels", "labels", "nodeSelector"}
ANNOTATION_MAPS = {"podAnnotations", "annotations"}


def key_error(key: str) -> str | None:
    """Why `key` is not a qualified name ([prefix/]name), or None."""
    prefix, _, name = key.rpartition("/")
    if "/" in prefix:
        return "at most one '/'"
    if prefix and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        return f"the prefix {prefix!r} must be a DNS subdomain (lower case, dots, at most 253 characters)"
    if not name:
        return "the name part is empty"
    if len(name) > 63:
        return f"the name part has {len(name)} characters (at most 63)"
    if not _NAME.match(name):
        return "the name must start and end with a letter or digit, with only - _ . between"
    return None


def value_error(value: str) -> str | None:
    """Why `value` is not a valid label value, or None."""
    if len(value) > 63:
        return f"{len(value)} characters (at most 63)"
    if value and not _NAME.match(value):
        return "it must be empty or start and end with a letter or digit, with only - _ . between"
    return None


def _maps(tree: Any) -> Iterator[tuple[KeyPath, str, dict[Any, Any]]]:
    for path, value in keyed(tree, LABEL_MAPS | ANNOTATION_MAPS):
        if isinstance(value, dict):
            yield path, "label" if path[-1] in LABEL_MAPS else "annotation", value


@rule(
    "labels-valid",
    reason="the API server refuses an object whose label or annotation key is not a qualified name, or "
    "whose label value (node selectors included) is not a label value: the install stops half way",
    remedy="keys as [dns-prefix/]name (name at most 63 characters: letters, digits, - _ .), label values at "
    "most 63 characters, starting and ending with a letter or digit",
)
def labels_valid(ctx: ValuesContext) -> Iterator[Hit]:
    for path, kind, mapping in _maps(ctx.values):
        for key, value in mapping.items():
            problem = key_error(str(key))
            if problem:
                yield Hit(f"{kind} key {key!r}: {problem}", (*path, key))
            elif kind == "label" and value is not None:
                problem = value_error(str(value))
                if problem:
                    yield Hit(f"label {key}={value!r}: {problem}", (*path, key))


def toleration_error(toleration: dict[str, Any]) -> str | None:
    """Why the API server refuses a toleration (core validation's validateTolerations), or None."""
    key, operator = str(toleration.get("key") or ""), toleration.get("operator") or "Equal"
    value = toleration.get("value")
    if key and key_error(key):
        return f"key {key!r}: {key_error(key)}"
    if not key and operator != "Exists":
        return "an empty key matches every taint only with operator Exists"
    if toleration.get("tolerationSeconds") is not None and toleration.get("effect") != "NoExecute":
        return "tolerationSeconds needs effect NoExecute"
    if operator == "Exists" and value:
        return f"operator Exists takes no value (got {value!r})"
    if operator == "Equal" and value is not None and value_error(str(value)):
        return f"value {value!r}: {value_error(str(value))}"
    return None


def _tolerations(tree: Any) -> Iterator[tuple[KeyPath, dict[str, Any]]]:
    for path, value in keyed(tree, {"tolerations"}):
        if isinstance(value, list):
            yield from (((*path, i), t) for i, t in enumerate(value) if isinstance(t, dict))


@rule(
    "tolerations-valid",
    reason="the API server refuses a pod whose toleration is malformed (a key that is not a qualified name, "
    "a value with operator Exists, an empty key without Exists): the workload never gets a pod",
    remedy="write tolerations as {key, operator: Equal, value, effect} or {key, operator: Exists, effect}; "
    "tolerationSeconds only with effect NoExecute",
)
def tolerations_valid(ctx: ValuesContext) -> Iterator[Hit]:
    for path, toleration in _tolerations(ctx.values):
        problem = toleration_error(toleration)
        if problem:
            yield Hit(f"toleration: {problem}", path)
