r"""JSON Schema `pattern` as Helm evaluates it: with Go's regexp, not Python's re.

Helm checks values against a chart's values.schema.json with a Go JSON Schema library (xeipuuv/gojsonschema,
santhosh-tekuri/jsonschema in newer releases); each compiles `pattern` with Go's regexp package. There \d,
\w, \s and \b are ASCII only (regexp/syntax: "Perl character classes (all ASCII-only)"; \s is [\t\n\f\r ],
without \v), and `$` without the m flag matches at the end of the text only. The jsonschema library that
`kvtier validate` runs uses Python's re.search (jsonschema/_keywords.py, pattern), where those classes take
every script and `$` also matches before a final newline: "4\u00a0MB" (a no-break space) or "4MB\n" (a YAML
block scalar) passed kvtier and were refused by `helm install`. tests/charts/test_schema_pattern_helm.py
holds this against the pinned Helm 3 and Helm 4.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import Any

from jsonschema.exceptions import ValidationError

GO_SPACE = r"\t\n\f\r "  # Go's \s (regexp/syntax); Python's ASCII \s also takes \v


@cache
def compile_as_go(pattern: str) -> re.Pattern[str]:
    r"""`pattern` with Go's meaning: re.ASCII for \d \w \b, \s spelt out as Go's set, and each `$`
    outside a [...] set as \Z (Python's end of text). (\S inside a set keeps Python's ASCII meaning.)"""
    out, i, in_set = [], 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":  # an escape stays as written, but for \s and \S
            escape = pattern[i : i + 2]
            if escape == r"\s":
                escape = GO_SPACE if in_set else f"[{GO_SPACE}]"
            elif escape == r"\S" and not in_set:
                escape = f"[^{GO_SPACE}]"
            out.append(escape)
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
