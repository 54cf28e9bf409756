"""Values against the bundled umbrella schema (JSON Schema draft 2020-12), every error at once.

Each error is turned into a Finding with the position of the key, what the schema expected and, for
a misspelt key or enum value, the closest valid one.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError, best_match
from referencing.exceptions import Unresolvable

from kvtier import paths
from kvtier import schema as schema_source
from kvtier.errors import UserError
from kvtier.validate.findings import SCHEMA, Finding
from kvtier.validate.loader import KeyPath, Loaded, format_path

UMBRELLA = "kv-tiered-inference"


@cache
def bundled(path: Path) -> dict[str, Any]:
    """A schema source with its file references inlined (kvtier.schema.bundle), once per process."""
    if not path.is_file():
        raise UserError(f"schema source {path} is missing; each chart's schema lives in schema/")
    try:
        return schema_source.bundle(path)
    except (OSError, ValueError, KeyError) as error:
        raise UserError(f"cannot bundle {path}: {error}") from None


@cache
def validator(source: Path | None = None) -> Draft202012Validator:
    """The umbrella schema, bundled from schema/ once per process."""
    # No check_schema here: it costs seconds per run; a test checks the bundle against the metaschema.
    return Draft202012Validator(bundled(source or paths.SCHEMA / f"{UMBRELLA}{schema_source.SUFFIX}"))


def closest(word: str, choices: list[str]) -> str:
    match = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if not match:
        lowered = {c.lower(): c for c in choices}
        match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
        match = [lowered[m] for m in match]
    return match[0] if match else ""


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "list",
        dict: "mapping",
    }.get(type(value), type(value).__name__)


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _translate(error: ValidationError, loaded: Loaded) -> list[Finding]:
    """One schema error -> findings (an additionalProperties error names each unknown key)."""
    at: KeyPath = tuple(error.absolute_path)
    keyword, schema, value = error.validator, error.schema, error.instance
    name = str(keyword)

    def finding(path: KeyPath, message: str, expected: str = "", suggestion: str = "") -> Finding:
        # a value's own problem points at the value; a key's (unknown, missing) at the key
        line, column = loaded.where(path, value=keyword not in ("additionalProperties", "required"))
        return Finding(
            SCHEMA,
            f"schema.{name}",
            message,
            str(loaded.path),
            line,
            column,
            format_path(path),
            expected=expected,
            suggestion=suggestion,
        )

    if keyword == "additionalProperties" and isinstance(value, dict) and isinstance(schema, dict):
        allowed = sorted(schema.get("properties", {}))
        patterns = schema.get("patternProperties", {})
        out = []
        for key in value:
            if key in allowed or any(re.search(p, key) for p in patterns):
                continue
            hint = closest(key, allowed)
            out.append(
                finding(
                    (*at, key),
                    f"unknown key {key!r}",
                    f"one of: {', '.join(allowed)}"[:200],
                    f"did you mean {hint!r}?" if hint else "",
                )
            )
        return out
    if keyword == "required":  # one error per missing key; its name is the message's first word
        missing = [k for k in error.validator_value if isinstance(value, dict) and k not in value]
        missing = [k for k in missing if error.message.startswith(repr(k))] or missing[:1]
        return [
            finding(at, f"missing required key {k!r}", f"{format_path(at)} to have {k!r}") for k in missing
        ]
    if keyword == "type":
        return [
            finding(at, f"wrong type: found {_type_name(value)} {_short(value)}", f"{error.validator_value}")
        ]
    if keyword == "enum":
        choices = [str(c) for c in error.validator_value]
        hint = closest(str(value), choices)
        return [
            finding(
                at,
                f"{_short(value)} is not an allowed value",
                f"one of: {', '.join(choices)}",
                f"did you mean {hint!r}?" if hint else "",
            )
        ]
    if keyword in ("oneOf", "anyOf") and error.context:
        best = best_match(error.context)
        return [
            dataclasses.replace(f, message=f"{f.message} (no alternative of {keyword} matched)")
            for f in _translate(best, loaded)
        ]
    expected = f"{keyword}: {_short(error.validator_value)}"
    return [finding(at, error.message if len(error.message) < 200 else error.message[:197] + "...", expected)]


def check(loaded: Loaded, source: Path | None = None) -> list[Finding]:
    try:
        errors = sorted(
            validator(source).iter_errors(loaded.data), key=lambda e: list(map(str, e.absolute_path))
        )
    except (Unresolvable, SchemaError) as error:  # the schema source is broken, not the values
        detail = str(error).split(" within ")[0][:200]  # the message goes on to print the whole schema
        raise UserError(
            f"the umbrella schema (schema/{UMBRELLA}{schema_source.SUFFIX}, bundled) cannot be used: "
            f"{detail}; fix the schema source and run `kvtier generate`"
        ) from None
    findings: list[Finding] = []
    for each in errors:
        findings.extend(_translate(each, loaded))
    return sorted(findings, key=lambda f: (f.line or 0, f.column or 0))
