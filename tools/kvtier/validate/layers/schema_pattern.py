r"""JSON Schema `pattern` as Helm evaluates it: with Go's regexp, not Python's re.

Helm checks values against a chart's values.schema.json with a Go library (xeipuuv/gojsonschema in Helm 3,
santhosh-tekuri/jsonschema in Helm 4), and each compiles `pattern` with Go's regexp package. There \d, \w,
\s and \b are ASCII only (regexp/syntax: "Perl character classes (all ASCII-only)"), and `$` without the
m flag matches at the end of the text only. The jsonschema library that `kvtier validate` runs uses Python's
re.search (jsonschema/_keywords.py, pattern), where those classes take every script and `$` also matches
before a final newline: "4\u00a0MB" (a no-break space) or "4MB\n" (a YAML block scalar) passed kvtier and
were refused by `helm install`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import Any

from jsonschema.exceptions import ValidationError


@cache
def compile_as_go(pattern: str) -> re.Pattern[str]:
    r"""`pattern` with Go's meaning: re.ASCII for the classes, and each `$` outside a [...] set as \Z
    (Python's end of text). Python's ASCII \s also takes \v, which Go's leaves out; no schema here
    tells them apart."""
    out, i, in_set = [], 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":  # an escape, whatever it is, stays as written
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_set:
            in_set = char != "]"
        elif char == "[":
            in_set = True
            # `]` first in a set (after an optional ^) is a member, not its end, in Go as in Python
            opening = re.match(r"\[\^?\]?", pattern[i:])
            assert opening is not None
            out.append(opening.group())
            i += len(opening.group())
            continue
        elif char == "$":
            char = r"\Z"
        out.append(char)
        i += 1
    return re.compile("".join(out), re.ASCII)


def keyword(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """Draft 2020-12's `pattern` (the jsonschema library's own message), matched as Go matches it."""
    if validator.is_type(instance, "string") and not compile_as_go(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")
