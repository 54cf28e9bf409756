"""Helm's `--set` and `--set-string` syntax, applied as Helm applies them (its strvals parser; checked
against the pinned Helm 3 and 4 in tests/charts/test_helm_set.py).

`a.b=c` nests; `a[0]=x` and `a[0].b=x` index a list (into the list the -f files gave, gaps filled with
null); `a={x,y}` is a list; `,` separates assignments; `\\` takes the next character literally. With
--set, `true`/`false`/`null` (any case) and base-10 integers without a leading zero become booleans, null
and integers; everything else, floats included, stays a string. --set-string keeps every value a string.
Helm applies every --set before every --set-string, whatever their order on the command line.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kvtier.errors import UserError
from kvtier.validate.inputs.loader import Loaded

MAX_INDEX = 65536  # Helm's limits
MAX_DEPTH = 30
_INTEGER = re.compile(r"[+-]?[0-9]+")


class _End(Exception):
    """The expression ended where Helm stops reading without an error."""


class _Refused(Exception):
    """What Helm's parser refuses."""


def typed(text: str, strings: bool = False) -> Any:
    """A --set value as Helm types it."""
    if strings:
        return text
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "null":
        return None
    if text == "0":
        return 0
    if text and text[0] != "0" and _INTEGER.fullmatch(text) and -(2**63) <= int(text) < 2**63:
        return int(text)
    return text


class _Parser:
    def __init__(self, text: str, strings: bool) -> None:
        self.text, self.pos, self.strings = text, 0, strings

    def until(self, stops: str) -> tuple[str, str]:
        """The characters up to one of `stops` (consumed, returned second; "" at the end)."""
        out: list[str] = []
        while self.pos < len(self.text):
            char = self.text[self.pos]
            self.pos += 1
            if char in stops:
                return "".join(out), char
            if char == "\\":
                if self.pos >= len(self.text):
                    return "".join(out), ""
                char = self.text[self.pos]
                self.pos += 1
            out.append(char)
        return "".join(out), ""

    def parse(self, into: dict[str, Any]) -> None:
        try:
            while True:
                self.key(into, 0)
        except _End:
            return

    def value(self) -> Any:
        """After `=`: a `{a,b}` list or one typed value (the end of the text: an empty string)."""
        if self.pos >= len(self.text):
            raise _End
        if self.text[self.pos] != "{":
            return typed(self.until(",")[0], self.strings)
        self.pos += 1
        items = []
        while True:
            item, last = self.until(",}")
            if not last:
                raise _Refused("list must terminate with '}'")
            items.append(typed(item, self.strings))
            if last == "}":
                if self.text[self.pos : self.pos + 1] == ",":
                    self.pos += 1
                return items

    def index(self) -> int:
        text, last = self.until("]")
        if not last:
            # Helm 3 refuses it; Helm 4 drops the rest of the expression without a word: a typo either way
            raise _Refused("an index without its closing ] (Helm 3 refuses it, Helm 4 ignores what follows)")
        if not _INTEGER.fullmatch(text):
            raise _Refused(f"error parsing index: {text!r} is not a number")
        return int(text)

    def key(self, data: dict[str, Any], depth: int) -> None:
        name, last = self.until("=[,.")
        if not last:
            if not name:
                raise _End
            raise _Refused(f"key {name!r} has no value")
        if last == ",":
            raise _Refused(f"key {name!r} has no value (cannot end with ,)")
        if last == "=":
            try:
                value = self.value()
            except _End:
                _put(data, name, "")
                raise
            _put(data, name, value)
        elif last == "[":
            index = self.index()
            items = data.get(name, [])
            if not isinstance(items, list):
                raise _Refused(f"{name} is not a list in the values before it")
            try:
                _put(data, name, self.item(items, index, depth))
            except _End:
                _put(data, name, items)
                raise
        else:
            if depth + 1 > MAX_DEPTH:
                raise _Refused(
                    f"value name nested level is greater than maximum supported nested level of {MAX_DEPTH}"
                )
            inner = data.get(name, {})
            if not isinstance(inner, dict):
                raise _Refused(f"{name} is not a mapping in the values before it")
            try:
                self.key(inner, depth + 1)
            except _End:
                if inner:
                    _put(data, name, inner)
                raise
            if not inner:
                raise _Refused(f"key map {name!r} has no value")
            _put(data, name, inner)

    def item(self, items: list[Any], index: int, depth: int) -> list[Any]:
        """`[index]` of a list and what follows it: a value, another index, or a key."""
        if index < 0:
            raise _Refused(f"negative {index} index not allowed")
        rest, last = self.until("[.=")
        if rest:
            raise _Refused(f"unexpected data at end of array index: {rest!r}")
        if not last:
            raise _End
        if last == "=":
            try:
                return _at(items, index, self.value())
            except _End:
                return _at(items, index, "")
        if last == "[":
            following = self.index()
            inner = items[index] if index < len(items) and items[index] is not None else []
            if not isinstance(inner, list):
                raise _Refused(f"item {index} is not a list in the values before it")
            return _at(items, index, self.item(inner, following, depth))
        inner = items[index] if index < len(items) else {}
        if not isinstance(inner, dict):
            inner = {}
            _at(items, index, inner)
        self.key(inner, depth)
        return _at(items, index, inner)


def _put(data: dict[str, Any], key: str, value: Any) -> None:
    if key:  # Helm drops an empty key
        data[key] = value


def _at(items: list[Any], index: int, value: Any) -> list[Any]:
    if index > MAX_INDEX:
        raise _Refused(f"index of {index} is greater than maximum supported index of {MAX_INDEX}")
    items.extend([None] * (index + 1 - len(items)))
    items[index] = value
    return items


def apply(base: dict[str, Any], sets: list[str], set_strings: list[str]) -> dict[str, Any]:
    """`base` (the -f files, merged) with every --set, then every --set-string, as Helm applies them.
    `base` is not changed. A UserError names the expression Helm would refuse."""
    out = copy.deepcopy(base)
    for flag, expressions in (("--set", sets), ("--set-string", set_strings)):
        for expression in expressions:
            try:
                _Parser(expression, flag == "--set-string").parse(out)
            except _Refused as error:
                why = str(error) if "Helm" in str(error) else f"{error}; Helm refuses it too"
                raise UserError(
                    f"{flag} {expression!r}: {why} (expected KEY=VALUE: a.b=c, list[0]=x, list={{x,y}}, "
                    "several joined by commas, \\ before a literal . , = or [)"
                ) from None
    return out


def check(sets: Sequence[str], set_strings: Sequence[str]) -> None:
    """Refuse (UserError) an expression Helm's parser refuses whatever the values files hold."""
    apply({}, list(sets), list(set_strings))


def layers(sets: Sequence[str], set_strings: Sequence[str]) -> list[Loaded]:
    """One layer per flag, in Helm's order, holding what that flag sets by itself: where a finding on a
    value a flag set points (the flag, with no line)."""
    out = []
    for flag, expressions in (("--set", sets), ("--set-string", set_strings)):
        for expression in expressions:
            mine: dict[str, Any] = {}
            try:
                _Parser(expression, flag == "--set-string").parse(mine)
            except _Refused:
                continue  # refused over its base: apply() reports it
            out.append(Loaded(Path(f"{flag} {expression}"), mine))
    return out
