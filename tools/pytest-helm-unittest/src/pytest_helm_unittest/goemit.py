"""YAML output byte-compatible with go.yaml.in/yaml/v3's Encoder at indent 2.

helm-unittest stores snapshots and prints values with that encoder, so snapshot files are only
interchangeable if this writer makes the same choices: sorted keys in yaml.v3's natural order, the
same quoting rules (plain, single, double, literal with chomping hints), no line wrapping.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from pytest_helm_unittest.govalues import GoTime, go_format_float, resolve_plain

_BREAKS = "\n\r\x85\u2028\u2029"
_OLD_BOOLS = {
    "y",
    "Y",
    "yes",
    "Yes",
    "YES",
    "on",
    "On",
    "ON",
    "n",
    "N",
    "no",
    "No",
    "NO",
    "off",
    "Off",
    "OFF",
}
_BASE60 = re.compile(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")
_ESCAPES = {
    "\0": "0", "\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r",
    "\x1b": "e", '"': '"', "\\": "\\", "\x85": "N", "\xa0": "_", "\u2028": "L", "\u2029": "P",
}  # fmt: skip


def _printable(c: str) -> bool:
    o = ord(c)
    return o == 0x0A or 0x20 <= o <= 0x7E or 0xA0 <= o <= 0xD7FF or (0xE000 <= o <= 0xFFFD and o != 0xFEFF)


def _analyze(s: str) -> dict[str, bool]:
    """The emitter's scalar analysis: which styles can carry this text unchanged."""
    if not s:
        return {"multiline": False, "plain": True, "single": True, "block": False}
    block_ind = line_breaks = special = tabs = False
    lead_space = lead_break = trail_space = trail_break = break_space = space_break = False
    prev_space = prev_break = False
    if s[:3] in ("---", "..."):
        block_ind = True
    preceded_ws = True
    n = len(s)
    for i, c in enumerate(s):
        followed_ws = i + 1 >= n or s[i + 1] in " \t" or s[i + 1] in _BREAKS
        # Only block-context indicators matter: this writer never emits flow collections with content.
        if i == 0:
            if c in "#,[]{}&*!|>'\"%@`" or (c in "?:-" and followed_ws):
                block_ind = True
        elif (c == ":" and followed_ws) or (c == "#" and preceded_ws):
            block_ind = True
        if c == "\t":
            tabs = True
        elif not _printable(c):
            special = True
        if c == " ":
            lead_space = lead_space or i == 0
            trail_space = trail_space or i == n - 1
            break_space = break_space or prev_break
            prev_space, prev_break = True, False
        elif c in _BREAKS:
            line_breaks = True
            lead_break = lead_break or i == 0
            trail_break = trail_break or i == n - 1
            space_break = space_break or prev_space
            prev_space, prev_break = False, True
        else:
            prev_space = prev_break = False
        preceded_ws = c in " \t" or c in _BREAKS
    plain = single = block = True
    if lead_space or lead_break or trail_space or trail_break or line_breaks or block_ind:
        plain = False
    if trail_space:
        block = False
    if break_space or space_break or tabs or special:
        plain = single = False
    if space_break or special:
        block = False
    return {"multiline": line_breaks, "plain": plain, "single": single, "block": block}


def _double_quoted(s: str) -> str:
    out = []
    for c in s:
        if _printable(c) and c not in _BREAKS and c not in '"\\' and c != "\ufeff":
            out.append(c)
        elif c in _ESCAPES:
            out.append("\\" + _ESCAPES[c])
        elif ord(c) <= 0xFF:
            out.append(f"\\x{ord(c):02X}")
        elif ord(c) <= 0xFFFF:
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(f"\\U{ord(c):08X}")
    return '"' + "".join(out) + '"'


def _literal(s: str, indent: int) -> str:
    hints = "2" if s[0] in " " + _BREAKS else ""
    if s[-1] not in _BREAKS:
        hints += "-"
    elif len(s) == 1 or s[-2] in _BREAKS:
        hints += "+"
    out = ["|" + hints + "\n"]
    at_line_start = True
    for c in s:
        if c == "\n":
            out.append("\n")
            at_line_start = True
        else:
            if at_line_start:
                out.append(" " * indent)
                at_line_start = False
            out.append(c)
    text = "".join(out)
    return text if text.endswith("\n") else text + "\n"


def _string(s: str, indent: int, simple_key: bool) -> str:
    tag = resolve_plain(s)[0] if s else "null"
    can_plain = tag == "str" and not (_BASE60.match(s) or s in _OLD_BOOLS)
    style = "literal" if "\n" in s else "plain" if can_plain else "double"
    info = _analyze(s)
    if simple_key and info["multiline"]:
        style = "double"
    if style == "plain" and (not info["plain"] or (not s and simple_key)):
        style = "single"
    if style == "single" and not info["single"]:
        style = "double"
    if style == "literal" and (not info["block"] or simple_key):
        style = "double"
    if style == "plain":
        return s
    if style == "single":
        return "'" + s.replace("'", "''") + "'"
    if style == "double":
        return _double_quoted(s)
    return _literal(s, indent)


def scalar(value: Any, indent: int = 2, simple_key: bool = False) -> str:
    """One scalar as yaml.v3 writes it; a literal block ends with its own newline."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_format_float(value)
    if isinstance(value, GoTime):
        return str(value)  # time.Time is written plain, in RFC 3339
    return _string(str(value), indent, simple_key)


def _key_less(a: Any, b: Any) -> bool:
    """yaml.v3 keyList.Less: numbers first and numerically, strings in natural (digit-aware) order."""
    a_num = isinstance(a, (int, float)) and not isinstance(a, bool)
    b_num = isinstance(b, (int, float)) and not isinstance(b, bool)
    if a_num and b_num:
        return a < b
    if not (isinstance(a, str) and isinstance(b, str)):
        return _kind(a) < _kind(b)
    digits = False
    for i in range(min(len(a), len(b))):
        ca, cb = a[i], b[i]
        if ca == cb:
            digits = ca.isdigit()
            continue
        al, bl = ca.isalpha(), cb.isalpha()
        if al and bl:
            return ca < cb
        if al or bl:
            return al if digits else bl
        an = bn = 0
        if ca == "0" or cb == "0":
            j = i - 1
            while j >= 0 and a[j].isdigit():
                if a[j] != "0":
                    an = bn = 1
                    break
                j -= 1
        ai = i
        while ai < len(a) and a[ai].isdigit():
            an, ai = an * 10 + int(a[ai]), ai + 1
        bi = i
        while bi < len(b) and b[bi].isdigit():
            bn, bi = bn * 10 + int(b[bi]), bi + 1
        if an != bn:
            return an < bn
        if ai != bi:
            return ai < bi
        return ca < cb
    return len(a) < len(b)


def _kind(v: Any) -> int:
    """reflect.Kind order for mixed key types (Bool < Int < Float < String)."""
    if isinstance(v, bool):
        return 1
    if isinstance(v, int):
        return 2
    if isinstance(v, float):
        return 14
    return 24 if isinstance(v, str) else 25


def sorted_keys(d: dict[Any, Any]) -> list[Any]:
    return sorted(
        d, key=functools.cmp_to_key(lambda x, y: -1 if _key_less(x, y) else 1 if _key_less(y, x) else 0)
    )


def _value_after_key(v: Any, indent: int) -> str:
    if isinstance(v, dict):
        return " {}\n" if not v else "\n" + _mapping(v, indent + 2)
    if isinstance(v, list):
        return " []\n" if not v else "\n" + _sequence(v, indent + 2)
    return " " + _line(scalar(v, indent + 2))


def _item(v: Any, indent: int) -> str:
    if isinstance(v, dict):
        return "{}\n" if not v else _mapping(v, indent + 2, inline_first=True)
    if isinstance(v, list):
        return "[]\n" if not v else _sequence(v, indent + 2, inline_first=True)
    return _line(scalar(v, indent + 2))


def _line(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def _mapping(d: dict[Any, Any], indent: int, inline_first: bool = False) -> str:
    parts = []
    for i, key in enumerate(sorted_keys(d)):
        prefix = "" if (i == 0 and inline_first) else " " * indent
        parts.append(
            prefix + scalar(key, indent + 2, simple_key=True) + ":" + _value_after_key(d[key], indent)
        )
    return "".join(parts)


def _sequence(items: list[Any], indent: int, inline_first: bool = False) -> str:
    parts = []
    for i, item in enumerate(items):
        prefix = "" if (i == 0 and inline_first) else " " * indent
        parts.append(prefix + "- " + _item(item, indent))
    return "".join(parts)


def dump(value: Any) -> str:
    """The document yaml.v3's Encoder (SetIndent(2)) writes for a decoded YAML value."""
    if isinstance(value, dict):
        return _mapping(value, 0) if value else "{}\n"
    if isinstance(value, list):
        return _sequence(value, 0) if value else "[]\n"
    return _line(scalar(value, 2))


def trusted_dump(value: Any) -> str:
    """helm-unittest's TrustedMarshalYAML: leading newlines of every string dropped first."""
    return dump(_strip_leading_newlines(value))


def _strip_leading_newlines(v: Any) -> Any:
    if isinstance(v, str):
        return v if type(v) is not str else v.lstrip("\n")
    if isinstance(v, dict):
        return {k: _strip_leading_newlines(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_strip_leading_newlines(x) for x in v]
    return v
