"""Filter expressions inside a path: `[?(@.name == "app" && !@.disabled)]`.

Operands are `@`/`$` sub-paths or literals; `==`, `!=`, `<`, `<=`, `>`, `>=`, `=~ /regex/`,
`&&`, `||`, `!`, parentheses. Comparison follows the Go library: numbers compare as floats, a
string never equals a number, and a comparison holds only if it holds for every pair of values
and at least one pair exists.

Operand paths are compiled by the caller's `subpath` function (yamlpath's), so this module does not
import the path language back: yamlpath depends on yamlfilter, not the other way round.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pytest_helm_unittest.govalues import GoTime, go_format_float

Pred = Callable[[Any, Any], bool]
Typed = tuple[str, str]  # (type, text): string, int, float, boolean, null, regex, unknown
_OPS = ("==", "!=", ">=", "<=", ">", "<", "=~")
_TERM_STOP = set(" &|=!><)")
# (sub-path text without its @/$, whether it starts at the root) -> a scanner (node, root) -> values
SubPath = Callable[[str, bool], Callable[[Any, Any], list[Any]]]


class FilterError(ValueError):
    """The filter expression does not parse (yamlpath reports it as a PathError)."""


def _typed(value: Any) -> Typed:
    if isinstance(value, GoTime):
        return ("unknown", str(value))  # a !!timestamp node: neither string nor number
    if isinstance(value, bool):
        return ("boolean", "true" if value else "false")
    if isinstance(value, int):
        return ("int", str(value))
    if isinstance(value, float):
        return ("float", go_format_float(value))
    if isinstance(value, str):
        return ("string", value)
    if value is None:
        return ("null", "null")
    return ("unknown", "")


def _compatible(a: str, b: str) -> bool:
    numeric = {"int", "float"}
    return (a in numeric and b in numeric) or a == b or (a == "string" and b == "regex")


def _order(left: Typed, right: Typed) -> int | None:
    """-1/0/1, or None when incomparable."""
    numeric = {"int", "float"}
    if left[0] in numeric and right[0] in numeric:
        a, b = float(left[1]), float(right[1])
        return (a > b) - (a < b)
    if left[0] not in numeric | {"string"} or right[0] not in numeric | {"string"}:
        return None
    return (left[1] > right[1]) - (left[1] < right[1])


_COMPARATORS: dict[str, Callable[[int | None], bool]] = {
    "==": lambda c: c == 0,
    "!=": lambda c: c != 0,
    ">": lambda c: c == 1,
    ">=": lambda c: c in (0, 1),
    "<": lambda c: c == -1,
    "<=": lambda c: c in (0, -1),
}


def _accept(op: str, left: Typed, right: Typed) -> bool:
    if op == "=~":
        return left[0] == "string" and right[0] == "regex" and re.search(right[1], left[1]) is not None
    check = _COMPARATORS[op]
    if not _compatible(left[0], right[0]):
        return check(None)
    if left[0] == "boolean":
        return check(0 if left[1].lower() == right[1].lower() else None)
    if left[0] == "null":
        return check(0)
    return check(_order(left, right))


def _either(a: Pred, b: Pred) -> Pred:
    return lambda n, r: a(n, r) or b(n, r)


def _both(a: Pred, b: Pred) -> Pred:
    return lambda n, r: a(n, r) and b(n, r)


class _Parser:
    def __init__(self, text: str, subpath: SubPath) -> None:
        self.text, self.pos, self.subpath = text, 0, subpath

    def error(self, what: str) -> FilterError:
        return FilterError(f"{what} at position {self.pos} in filter {self.text!r}")

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def take(self, token: str) -> bool:
        self.skip()
        if self.text.startswith(token, self.pos):
            self.pos += len(token)
            return True
        return False

    def parse(self) -> Pred:
        pred = self.disjunction()
        self.skip()
        if self.pos != len(self.text):
            raise self.error("invalid filter expression")
        return pred

    def disjunction(self) -> Pred:
        left = self.conjunction()
        while self.take("||"):
            left = _either(left, self.conjunction())
        return left

    def conjunction(self) -> Pred:
        left = self.unary()
        while self.take("&&"):
            left = _both(left, self.unary())
        return left

    def unary(self) -> Pred:
        self.skip()
        if self.text.startswith("!", self.pos) and not self.text.startswith("!=", self.pos):
            self.pos += 1
            inner = self.unary()
            return lambda n, r: not inner(n, r)
        if self.take("("):
            inner = self.disjunction()
            if not self.take(")"):
                raise self.error("missing )")
            return inner
        return self.basic()

    def basic(self) -> Pred:
        left = self.term()
        self.skip()
        op = next((o for o in _OPS if self.text.startswith(o, self.pos)), None)
        if op is None:
            if left[0] == "path":
                scan = left[1]
                return lambda n, r: bool(scan(n, r))
            if left[0] == "literal" and left[1]()[0] == "boolean":
                value = left[1]()[1] == "true"
                return lambda n, r: value
            return lambda n, r: False
        self.pos += len(op)
        self.skip()
        right = self.regex() if op == "=~" else self.term()
        lscan, rscan = self.scanner(left), self.scanner(right)

        def compare(node: Any, root: Any) -> bool:
            matched = False
            for lv in lscan(node, root):
                for rv in rscan(node, root):
                    if not _accept(op, lv, rv):
                        return False
                    matched = True
            return matched

        return compare

    @staticmethod
    def scanner(term: tuple[str, Any]) -> Callable[[Any, Any], list[Typed]]:
        if term[0] == "path":
            scan = term[1]
            return lambda n, r: [_typed(v) for v in scan(n, r)]
        literal = term[1]()
        return lambda n, r: [literal]

    def regex(self) -> tuple[str, Any]:
        if not self.text.startswith("/", self.pos):
            raise self.error("regular expression does not start with /")
        j, escape = self.pos + 1, False
        while j < len(self.text) and (escape or self.text[j] != "/"):
            escape = not escape and self.text[j] == "\\"
            j += 1
        if j >= len(self.text):
            raise self.error("unmatched regular expression delimiter /")
        body = self.text[self.pos + 1 : j].replace("\\/", "/")
        self.pos = j + 1
        return ("literal", lambda: ("regex", body))

    def term(self) -> tuple[str, Any]:
        self.skip()
        text, start = self.text, self.pos
        if text.startswith(("@", "$"), start):
            j, depth, quote = start + 1, 0, ""
            while j < len(text):
                c = text[j]
                if quote:
                    quote = "" if c == quote else quote
                elif c in "'\"" and depth:
                    quote = c
                elif c == "[":
                    depth += 1
                elif c == "]":
                    depth -= 1
                elif depth == 0 and c in _TERM_STOP:
                    break
                j += 1
            sub, from_root = text[start + 1 : j], text[start] == "$"
            self.pos = j
            return ("path", self.subpath(sub, from_root))
        for quote in ("'", '"'):
            if text.startswith(quote, start):
                end = text.find(quote, start + 1)
                if end < 0:
                    raise self.error(f"unmatched string delimiter {quote}")
                self.pos = end + 1
                value = text[start + 1 : end]
                return ("literal", lambda v=value: ("string", v))
        for word, kind in (("true", "boolean"), ("false", "boolean"), ("null", "null")):
            if text.startswith(word, start):
                self.pos = start + len(word)
                return ("literal", lambda w=word, k=kind: (k, w))
        match = re.match(r"[.\-0-9][0-9.eE\-]*", text[start:])
        if match:
            literal = match.group(0)
            self.pos = start + len(literal)
            is_float = literal[0] == "." or any(c in ".eE-" for c in literal[1:])
            try:
                float(literal) if is_float else int(literal)
            except ValueError:
                raise self.error(f"invalid numeric literal {literal!r}") from None
            kind = "float" if is_float else "int"
            return ("literal", lambda v=literal, k=kind: (k, v))
        raise self.error("invalid filter term")


def compile_filter(text: str, subpath: SubPath) -> Pred:
    """A predicate (node, root) -> bool for the body of `[?( ... )]`; operand paths via `subpath`."""
    return _Parser(text, subpath).parse()
