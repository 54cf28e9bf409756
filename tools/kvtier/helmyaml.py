"""YAML as Helm and the API server read it, not as PyYAML does.

Helm reads values files, and Kubernetes reads manifests, with sigs.k8s.io/yaml: go-yaml v2 resolves each
plain scalar, then the result is converted to JSON. Both steps differ from PyYAML's YAML 1.1 resolver, and
a validator that reads `y` as a string or `10:30` as 630 judges values Helm never sees. The rules here were
read from sigs.k8s.io/yaml v1.4.0 (goyaml.v2/resolve.go, yaml.go) and Go's strconv, and are checked
against the pinned Helm 3 and Helm 4 binaries on generated scalars (tests/charts/test_helm_yaml.py):

- booleans: y Y yes Yes YES true True TRUE on On ON, and n N no No NO false False FALSE off Off OFF;
- null: the empty scalar, ~ null Null NULL;
- a scalar starting with a sign or digit: Go's integer syntax (0x, 0o, 0b, a leading 0 for octal; every
  `_` dropped first), then a decimal float with an optional exponent (`1e3`, `1.`; an out-of-range one
  stays a string); a scalar starting with `.`: a decimal float (`.5`) or .inf/.nan;
- everything else, timestamps and sexagesimal `1:20` included, is a string.

After JSON, every number is a float64: integers past 2**53 lose their low digits; infinities and NaN are
refused (`json_problem`). Mapping keys become strings: bools as true/false, floats in Go's shortest
float32 `%g` form.
"""

from __future__ import annotations

import math
import re
import struct
from typing import Any

import yaml

BOOL_TAG = "tag:yaml.org,2002:bool"
INT_TAG = "tag:yaml.org,2002:int"
FLOAT_TAG = "tag:yaml.org,2002:float"
NULL_TAG = "tag:yaml.org,2002:null"
STR_TAG = "tag:yaml.org,2002:str"
TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"

_TRUE = ("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON")
_FALSE = ("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF")
_WORDS: dict[str, tuple[str, Any]] = {
    **dict.fromkeys(_TRUE, (BOOL_TAG, True)),
    **dict.fromkeys(_FALSE, (BOOL_TAG, False)),
    **{w: (NULL_TAG, None) for w in ("", "~", "null", "Null", "NULL")},
    **{w: (FLOAT_TAG, math.nan) for w in (".nan", ".NaN", ".NAN")},
    **{w: (FLOAT_TAG, math.inf) for w in (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF")},
    **{w: (FLOAT_TAG, -math.inf) for w in ("-.inf", "-.Inf", "-.INF")},
}
_NUMBER_STARTS = set("+-0123456789")
_DECIMAL_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_DIGITS = {2: "[01]+", 8: "[0-7]+", 10: "[0-9]+", 16: "[0-9a-fA-F]+"}  # Go's digits per base
INT64 = (-(2**63), 2**63 - 1)
UINT64_MAX = 2**64 - 1
EXACT_IN_JSON = 2**53  # a JSON number is a float64: integers beyond this are rounded


def _go_unsigned(text: str) -> int | None:
    """strconv.ParseUint(text, 0, 64): base from a 0x/0o/0b prefix, a leading 0 means octal, no sign."""
    if not text:
        return None
    base, digits = 10, text
    if text[0] == "0":
        prefixes = {"b": 2, "o": 8, "x": 16}
        if len(text) >= 3 and text[1].lower() in prefixes:
            base, digits = prefixes[text[1].lower()], text[2:]
        else:
            base, digits = 8, text[1:]
    if not digits and base == 8:  # "0" itself
        return 0
    if not re.fullmatch(_DIGITS[base], digits):
        return None
    value = int(digits, base)
    return value if value <= UINT64_MAX else None


def _go_signed(text: str, base: int = 0) -> int | None:
    """strconv.ParseInt(text, base, 64), base 0 (prefixes) or 2."""
    negative = text[:1] == "-"
    body = text[1:] if text[:1] in "+-" else text
    if base == 2:
        value = int(body, 2) if body and re.fullmatch(_DIGITS[2], body) else None
    else:
        value = _go_unsigned(body)
    if value is None:
        return None
    value = -value if negative else value
    return value if INT64[0] <= value <= INT64[1] else None


def _go_float(text: str) -> float | None:
    """strconv.ParseFloat of a decimal float go-yaml accepts; None when out of range (Go's ErrRange)."""
    if not _DECIMAL_FLOAT.fullmatch(text):
        return None
    value = float(text)
    return None if math.isinf(value) else value


def resolve(text: str) -> tuple[str, Any]:
    """The tag and value go-yaml v2 gives a plain (unquoted, untagged) scalar."""
    if text in _WORDS:
        return _WORDS[text]
    first = text[:1]
    if first == ".":
        value = _go_float(text)
        return (FLOAT_TAG, value) if value is not None else (STR_TAG, text)
    if first not in _NUMBER_STARTS:
        return STR_TAG, text
    plain = text.replace("_", "")
    for number in (_go_signed(plain), _go_unsigned(plain)):
        if number is not None:
            return INT_TAG, number
    value = _go_float(plain)
    if value is not None:
        return FLOAT_TAG, value
    # go-yaml's own binary fallback: the digits after "0b" (or "-0b") go through ParseInt in base 2
    if plain.startswith("0b") and (number := _go_signed(plain[2:], 2)) is not None:
        return INT_TAG, number
    if plain.startswith("-0b") and (number := _go_signed("-" + plain[3:], 2)) is not None:
        return INT_TAG, number
    return STR_TAG, text


def json_number(value: Any) -> Any:
    """A value as Helm holds it after the JSON step: a number is a float64 (kept an int while exact)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > EXACT_IN_JSON:
        return float(value)
    return value


def json_problem(value: Any) -> str:
    """Why Helm's YAML-to-JSON step refuses this scalar, or '' when it converts."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value} has no JSON form (Helm: 'json: unsupported value'); quote it if you mean text"
    return ""


def key_text(key: Any) -> str | None:
    """A mapping key as sigs.k8s.io/yaml turns it into a JSON key; None when it refuses the key."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key) if INT64[0] <= key <= INT64[1] else None
    if isinstance(key, float):
        return go_float32_g(key)
    return None


def go_float32_g(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 32): the shortest digits that read back as the same float32,
    exponent form when the exponent is below -4 or at least 6 (infinities and NaN as YAML spells them)."""
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    single = struct.unpack("f", struct.pack("f", value))[0]
    if single == 0:
        return "-0" if math.copysign(1, single) < 0 else "0"
    for digits in range(1, 10):
        mantissa, exponent = f"{single:.{digits - 1}e}".split("e")
        if struct.unpack("f", struct.pack("f", float(f"{mantissa}e{exponent}")))[0] == single:
            break
    sign = "-" if mantissa.startswith("-") else ""
    figures = mantissa.lstrip("-").replace(".", "").rstrip("0") or "0"
    exp = int(exponent)
    if exp < -4 or exp >= 6:
        tail = f".{figures[1:]}" if len(figures) > 1 else ""
        return f"{sign}{figures[0]}{tail}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if exp < 0:
        return f"{sign}0.{'0' * (-exp - 1)}{figures}"
    whole = figures[: exp + 1].ljust(exp + 1, "0")
    fraction = figures[exp + 1 :]
    return f"{sign}{whole}{'.' + fraction if fraction else ''}"


_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Loader(_Base):  # type: ignore[misc,valid-type]
    """PyYAML's safe loader with Helm's resolution of plain scalars and Helm's string keys. Values that
    Helm's JSON step refuses (.inf, .nan, a null key) load as they are; see json_problem and key_text."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode and implicit[0] and value != "<<":  # "<<" stays a merge key
            return resolve(value)[0]
        return super().resolve(kind, value, implicit)

    def construct_helm_scalar(self, node: yaml.ScalarNode) -> Any:
        """An explicitly tagged scalar converts as go-yaml does (`!!float 1` is 1.0); a value that does
        not fit its tag is Helm's error too."""
        tag, value = resolve(node.value)
        if node.tag == tag or (node.tag == FLOAT_TAG and tag == INT_TAG):
            return float(value) if node.tag == FLOAT_TAG else value
        if node.tag == TIMESTAMP_TAG:
            return node.value  # Helm hands timestamps to templates as the text written
        raise yaml.constructor.ConstructorError(
            None, None, f"cannot read {node.value!r} as {node.tag.rsplit(':', 1)[-1]}", node.start_mark
        )

    def construct_helm_mapping(self, node: yaml.MappingNode) -> dict[Any, Any]:
        out = {}
        for key, value in self.construct_mapping(node, deep=True).items():
            text = key_text(key)
            out[key if text is None else text] = value
        return out


for _tag in (BOOL_TAG, INT_TAG, FLOAT_TAG, NULL_TAG, TIMESTAMP_TAG):
    Loader.add_constructor(_tag, Loader.construct_helm_scalar)
Loader.add_constructor("tag:yaml.org,2002:map", Loader.construct_helm_mapping)
# a plain "<<" is a merge key where it is a key, and the text "<<" where it is a value (go-yaml)
Loader.add_constructor("tag:yaml.org,2002:merge", lambda loader, node: node.value)


def load(text: str) -> Any:
    """One YAML document as Helm reads it."""
    return yaml.load(text, Loader=Loader)


class Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper that quotes every string Helm would read as something else (`y`, `1e3`,
    `0o17`), so a file written here reads back in Helm as it was meant."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode and implicit[0] and value != "<<":
            return resolve(value)[0]
        return super().resolve(kind, value, implicit)


def _represent_int(dumper: Dumper, data: int) -> yaml.ScalarNode:
    # an integer past 64 bits is plain digits that Helm reads as a float64, not an `!!int` it refuses
    text = str(data)
    return dumper.represent_scalar(resolve(text)[0], text)


Dumper.add_representer(int, _represent_int)


def dump(data: Any, **options: Any) -> str:
    """YAML text of `data` that Helm reads back as `data`."""
    return yaml.dump(data, Dumper=Dumper, **options)
