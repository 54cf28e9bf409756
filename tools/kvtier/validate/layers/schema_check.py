"""The effective values against the bundled schemas (JSON Schema draft 2020-12), every error at once.

As Helm does: the umbrella's schema against all the effective values (chart defaults, the user's layers),
each enabled subchart's schema against the values under its name. Each error is turned into a Finding
with the position of the key (in the user's file, or the chart default it comes from), what the schema
expected and, for a misspelt key or enum value, the closest valid one.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError, best_match
from referencing.exceptions import Unresolvable

from kvtier import paths
from kvtier import schema as schema_source
from kvtier.errors import UserError
from kvtier.validate.findings import SCHEMA, Finding
from kvtier.validate.inputs import merge
from kvtier.validate.inputs.loader import KeyPath, format_path
from kvtier.validate.inputs.origins import Origins
from kvtier.validate.layers import schema_pattern

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


# (subschema, chart default) pairs found valid: most of the effective values are chart defaults the user
# left alone, the same objects in every file of a run (merge.is_chart_default), so each is checked once.
_clean: set[tuple[int, int]] = set()


def _properties(validator: Any, properties: dict[str, Any], instance: Any, schema: Any) -> Any:
    """Draft 2020-12's `properties`, skipping a chart default already found valid against its subschema."""
    if not validator.is_type(instance, "object"):
        return
    for name, subschema in properties.items():
        if name not in instance:
            continue
        value = instance[name]
        seen = (id(subschema), id(value))
        if seen in _clean:
            continue
        valid = True
        for error in validator.descend(value, subschema, path=name, schema_path=name):
            valid = False
            yield error
        if valid and merge.is_chart_default(value):
            _clean.add(seen)


# `pattern` as Helm's Go validator matches it (kvtier.validate.layers.schema_pattern).
_Validator = validators.extend(
    Draft202012Validator, {"properties": _properties, "pattern": schema_pattern.keyword}
)


@cache
def validator(source: Path | None = None) -> Draft202012Validator:
    """The umbrella schema, bundled from schema/ once per process."""
    # No check_schema here: it costs seconds per run; a test checks the bundle against the metaschema.
    return _Validator(bundled(source or paths.SCHEMA / f"{UMBRELLA}{schema_source.SUFFIX}"))


def closest(word: str, choices: list[str]) -> str:
    match = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if not match:
        lowered = {c.lower(): c for c in choices}
        match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
        match = [lowered[m] for m in match]
    return match[0] if match else ""


def type_name(value: Any) -> str:
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


# what unquoted text Helm's YAML reads as each non-string type (kvtier.helmyaml)
_UNQUOTED = {
    "boolean": "y, n, yes, no, on, off, true and false",
    "integer": "digits, 0x/0o/0b prefixes and a leading 0 (octal)",
    "number": "digits with a point or an exponent (1e3)",
    "null": "an empty value, ~ and null",
}


def _quote_hint(value: Any, expected: Any) -> str:
    """For text the schema wants but YAML read as something else: the fix is quotes."""
    wanted = expected if isinstance(expected, list) else [expected]
    kind = type_name(value)
    if "string" not in wanted or kind not in _UNQUOTED:
        return ""
    return f"if you meant text, quote it: Helm reads unquoted {_UNQUOTED[kind]} as {kind}"


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _translate(error: ValidationError, origins: Origins, scope: KeyPath = ()) -> list[Finding]:
    """One schema error -> findings (an additionalProperties error names each unknown key)."""
    at: KeyPath = (*scope, *error.absolute_path)
    keyword, schema, value = error.validator, error.schema, error.instance
    name = str(keyword)

    def finding(
        path: KeyPath, message: str, expected: str = "", suggestion: str = "", missing: str = ""
    ) -> Finding:
        # a value's own problem points at the value; a key's (unknown, missing) at the key
        spot = (
            origins.missing(path, missing)
            if missing
            else origins.at(path, value=keyword not in ("additionalProperties", "required"))
        )
        return Finding(
            SCHEMA,
            f"schema.{name}",
            f"{message} ({spot.note})" if spot.note else message,
            spot.file,
            spot.line,
            spot.column,
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
            finding(at, f"missing required key {k!r}", f"{format_path(at)} to have {k!r}", missing=k)
            for k in missing
        ]
    if keyword == "type":
        found = f"wrong type: found {type_name(value)} {_short(value)}"
        return [finding(at, found, f"{error.validator_value}", _quote_hint(value, error.validator_value))]
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
            for f in _translate(best, origins, scope)
        ]
    expected = f"{keyword}: {_short(error.validator_value)}"
    return [finding(at, error.message if len(error.message) < 200 else error.message[:197] + "...", expected)]


def _validators(effective: merge.Effective, source: Path | None) -> list[tuple[KeyPath, Any, Path]]:
    """(key path, values, schema) of each schema Helm checks: the top chart's against all the values
    (`source` replaces it), each enabled subchart's against its own. A chart's schema is its source in
    schema/ (the bundle `kvtier generate` copies into the chart; a stale copy is its own finding), else
    the chart's own values.schema.json; a chart with neither is not checked, as in Helm."""
    out: list[tuple[KeyPath, Any, Path]] = []
    chosen: dict[KeyPath, Path | None] = {}
    for at, chart, values in effective.scopes():
        own = paths.SCHEMA / f"{chart.chart_name}{schema_source.SUFFIX}"
        schema = chosen[at] = source if source and not at else own if own.is_file() else chart.schema_file
        parent = chosen.get(at[:-1]) if at else None
        if schema is not None and not (parent and _embeds(parent, at[-1], schema)):
            out.append((at, values, schema))
    return out


ANNOTATIONS = ("$schema", "$id", "title", "description", "$comment", "default", "examples")


@cache
def _embeds(parent: Path, name: str, schema: Path) -> bool:
    """Whether the parent's schema holds `schema` itself under `name` (the umbrella's holds Curvine's):
    then checking it again finds the same errors, and is skipped."""
    try:
        inside = bundled(parent).get("properties", {}).get(name)
        alone = bundled(schema)
    except UserError:
        return False

    def bare(node: Any) -> Any:
        return {k: v for k, v in node.items() if k not in ANNOTATIONS} if isinstance(node, dict) else node

    return bare(inside) == bare(alone)


def errors(effective: merge.Effective, source: Path | None = None) -> list[tuple[KeyPath, ValidationError]]:
    """Every schema error Helm would meet, with the key path of the values its schema judged."""
    out = []
    for at, values, schema in _validators(effective, source):
        try:
            found = sorted(
                validator(schema).iter_errors(values), key=lambda e: list(map(str, e.absolute_path))
            )
        except (Unresolvable, SchemaError) as error:  # the schema source is broken, not the values
            detail = str(error).split(" within ")[0][:200]  # the message goes on to print the whole schema
            raise UserError(
                f"the schema {schema.name} (bundled) cannot be used: "
                f"{detail}; fix the schema source and run `kvtier generate`"
            ) from None
        out += [(at, each) for each in found]
    return out


def check(effective: merge.Effective, origins: Origins, source: Path | None = None) -> list[Finding]:
    """Findings of every schema on the effective values, each once (the umbrella's schema holds the
    subcharts' too, so most errors are found twice)."""
    found: dict[tuple[Any, ...], Finding] = {}
    for at, each in errors(effective, source):
        for f in _translate(each, origins, at):
            found.setdefault((f.rule, f.path, f.message, f.file, f.line), f)
    rank = {str(layer.path): i for i, layer in enumerate(origins.user)}  # the user's files first
    return sorted(found.values(), key=lambda f: (rank.get(f.file, len(rank)), f.line or 0, f.column or 0))
