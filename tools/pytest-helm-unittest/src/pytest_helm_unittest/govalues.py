"""Go/yaml.v3 value semantics in Python: how helm-unittest reads YAML and compares values.

helm-unittest decodes suites and rendered manifests with go.yaml.in/yaml/v3 into `interface{}` and
compares with reflect.DeepEqual. So: only true/false (any case variant listed by yaml.v3) are booleans,
int and float are different types, timestamps stay strings, `0777` is octal, `1_000` is an int.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_NULLS = {"", "~", "null", "Null", "NULL"}
_SPECIAL_FLOATS = {
    ".nan": math.nan, ".NaN": math.nan, ".NAN": math.nan,
    ".inf": math.inf, ".Inf": math.inf, ".INF": math.inf,
    "+.inf": math.inf, "+.Inf": math.inf, "+.INF": math.inf,
    "-.inf": -math.inf, "-.Inf": -math.inf, "-.INF": -math.inf,
}  # fmt: skip
_YAML_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_DOT_FLOAT = re.compile(r"^\.[0-9]+([eE][-+]?[0-9]+)?$")
_TIMESTAMP = re.compile(
    r"^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}"
    r"([Tt ][0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(\.[0-9]{1,9})?(Z|[-+][0-9]{2}:[0-9]{2})?)?$"
)
INT64_MIN, INT64_MAX, UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1


class GoUint(int):
    """An integer yaml.v3 decodes as uint64 (above int64's range)."""


def _go_parse_int(text: str) -> int | None:
    """strconv.ParseInt/ParseUint with base 0 (prefixes 0x, 0o, 0b, and a bare leading 0 = octal)."""
    sign, body = 1, text
    if body[:1] in "+-":
        sign, body = (-1 if body[0] == "-" else 1), body[1:]
    if not body:
        return None
    lower = body.lower()
    for prefix, base in (("0x", 16), ("0o", 8), ("0b", 2)):
        if lower.startswith(prefix):
            digits, used = body[2:], base
            break
    else:
        digits, used = (body[1:], 8) if len(body) > 1 and body[0] == "0" else (body, 10)
    if not digits or not all(
        c in "0123456789abcdefABCDEF"[: used + (6 if used == 16 else 0)] for c in digits
    ):
        return None
    value = sign * int(digits, used)
    if value < INT64_MIN or value > UINT64_MAX or (sign < 0 and value < INT64_MIN):
        return None
    return value


def resolve_plain(text: str) -> tuple[str, Any]:
    """(tag, value) yaml.v3 gives a plain scalar: tag one of str, bool, null, int, float, timestamp."""
    if text in _BOOLS:
        return "bool", _BOOLS[text]
    if text in _NULLS:
        return "null", None
    if text in _SPECIAL_FLOATS:
        return "float", _SPECIAL_FLOATS[text]
    first = text[0]
    if first == ".":
        if _DOT_FLOAT.match(text):
            return "float", float(text)
        return "str", text
    if first not in "+-0123456789":
        return "str", text
    if _TIMESTAMP.match(text):
        return "timestamp", text
    plain = text.replace("_", "")
    number = _go_parse_int(plain)
    if number is not None:
        return "int", GoUint(number) if number > INT64_MAX else number
    if _YAML_FLOAT.match(plain):
        return "float", float(plain)
    for prefix, base in (("0b", 2), ("-0b", 2), ("0o", 8), ("-0o", 8)):
        if plain.startswith(prefix):
            try:
                return "int", int(("-" if prefix[0] == "-" else "") + plain[len(prefix) :], base)
            except ValueError:
                return "str", text
    return "str", text


class GoTime(str):
    """A timestamp yaml.v3 decoded as time.Time (plain scalar inside a rendered manifest)."""


_TS_PARTS = re.compile(
    r"^([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"
    r"(?:[Tt ]([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:\.([0-9]{1,9}))?(Z|[-+][0-9]{2}:[0-9]{2})?)?$"
)


def rfc3339(text: str) -> str | None:
    """time.Time.Format(RFC3339Nano) of a YAML timestamp yaml.v3 accepts, or None."""
    m = _TS_PARTS.match(text)
    if not m:
        return None
    year, month, day, hour, minute, sec, frac, zone = m.groups()
    if hour is None:
        hour = minute = sec = "0"
    if hour is not None and zone is None and "T" in text.upper() and " " not in text:
        return None  # time.Parse needs a zone with the T form
    stamp = f"{year}-{int(month):02d}-{int(day):02d}T{int(hour):02d}:{int(minute):02d}:{int(sec):02d}"
    frac = (frac or "").rstrip("0")
    return stamp + (f".{frac}" if frac else "") + ("Z" if zone in (None, "Z", "+00:00") else zone)


class _Loader(yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader):  # type: ignore[misc]
    """PyYAML with yaml.v3's plain-scalar resolution instead of YAML 1.1's."""


_Loader.yaml_implicit_resolvers = {}
_Loader.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^<<$"), ["<"])


def _construct_str(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    if node.style:  # quoted or block scalars are always strings (plain is None or '')
        return node.value
    tag, value = resolve_plain(node.value)
    if tag == "timestamp":  # yaml.v3 (v3.0.4) decodes a plain timestamp into interface{} as time.Time
        stamp = rfc3339(node.value)
        return GoTime(stamp) if stamp else value
    return value


def _construct_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    tag, value = resolve_plain(node.value)
    return float(value) if tag in ("int", "float") else float(node.value)


_Loader.add_constructor("tag:yaml.org,2002:str", _construct_str)
_Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)
_Loader.add_constructor(
    "tag:yaml.org,2002:timestamp", lambda loader, node: GoTime(rfc3339(node.value) or node.value)
)


def load(text: str) -> Any:
    """One YAML document with yaml.v3 semantics."""
    return yaml.load(text, Loader=_Loader)  # a SafeLoader subclass: no arbitrary objects


def load_all(text: str) -> list[Any]:
    return list(yaml.load_all(text, Loader=_Loader))


def is_go_string(value: Any) -> bool:
    """A Go string (a time.Time is not one, although it is kept as text here)."""
    return isinstance(value, str) and not isinstance(value, GoTime)


def go_equal(a: Any, b: Any) -> bool:
    """reflect.DeepEqual over decoded YAML: types must match (bool is not int, int is not float)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(go_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(go_equal, a, b))
    if a is None or b is None:
        return a is None and b is None
    if type(a) is not type(b):
        return False
    return bool(a == b)


def go_type_name(value: Any) -> str:
    """reflect.TypeOf(value).String() for a decoded YAML value ("" for nil)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, GoUint):
        return "uint64"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, GoTime):
        return "time.Time"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "map[string]interface {}"
    if isinstance(value, list):
        return "[]interface {}"
    return type(value).__name__


def go_format_float(value: float) -> str:
    """strconv.FormatFloat(v, 'g', -1, 64) as yaml.v3 writes it (.inf, -.inf, .nan)."""
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exp_text = f"{abs(value):.16e}".partition("e")
    # shortest round-trip digits, as Go's shortest formatting picks them
    for precision in range(17):
        candidate = f"{abs(value):.{precision}e}"
        if float(candidate) == abs(value):
            mantissa, _, exp_text = candidate.partition("e")
            break
    digits = mantissa.replace(".", "").rstrip("0") or "0"
    exp = int(exp_text)
    if exp < -4 or exp >= 6:
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mant}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    point = exp + 1
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{sign}{digits}{'0' * (point - len(digits))}"
    return f"{sign}{digits[:point]}.{digits[point:]}"


def load_manifests(text: str) -> list[Any]:
    return load_all(text)


class _PlainLoader(_Loader):
    """Values as Helm reads them back from our own values documents: timestamps stay text."""


_PlainLoader.add_constructor(
    "tag:yaml.org,2002:str", lambda loader, node: node.value if node.style else resolve_plain(node.value)[1]
)
_PlainLoader.add_constructor("tag:yaml.org,2002:timestamp", lambda loader, node: node.value)


def load_plain(text: str) -> Any:
    return yaml.load(text, Loader=_PlainLoader)
