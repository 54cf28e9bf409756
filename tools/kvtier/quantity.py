"""Kubernetes resource quantities ("500m", "96Gi", "1e3"), read exactly as the API server reads them.

The grammar and suffixes are those of k8s.io/apimachinery's resource.Quantity: a signed decimal number,
then a binary suffix (Ki ... Ei), a decimal suffix (n, u, m, "", k, M, G, T, P, E) or a decimal exponent
(e3, E-2). Values are Fractions, so "1Gi" vs "1073741824" and "0.5" vs "500m" compare exactly, as the
API server compares requests with limits.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

_NUMBER = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)$")
_EXPONENT = re.compile(r"^[eE]([+-]?[0-9]+)$")
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
MAX_EXPONENT = 64
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def parse(value: Any) -> Fraction:
    """The quantity's value; ValueError for what the API server would refuse as a quantity."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    match = _NUMBER.match(str(value))
    if not match:
        raise ValueError(
            f"{value!r} is not a quantity: expected a number with an optional suffix (500m, 96Gi)"
        )
    number, suffix = Fraction(match.group(1)), match.group(2)
    if suffix in _BINARY:
        return number * 2 ** _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * Fraction(10) ** _DECIMAL[suffix]
    exponent = _EXPONENT.match(suffix)
    if exponent:
        power = int(exponent.group(1))
        if abs(power) > MAX_EXPONENT:  # no resource is that large or small; 10**huge would hang
            raise ValueError(f"{value!r}: exponent {power} is out of range")
        return number * Fraction(10) ** power
    raise ValueError(
        f"{value!r} is not a quantity: unknown suffix {suffix!r} (use Ki, Mi, Gi, m, k, M, G ...)"
    )


def try_parse(value: Any) -> Fraction | None:
    try:
        return parse(value)
    except ValueError:
        return None


__all__ = ["parse", "try_parse"]
