"""Reading objects whose shape nobody has checked yet (values files, rendered manifests, API answers): a
field of the wrong type reads as empty, so a rule reports what it can see instead of raising."""

from __future__ import annotations

from typing import Any


def mapping(value: Any) -> dict[str, Any]:
    """`value` if it is a mapping, else an empty one."""
    return value if isinstance(value, dict) else {}


def sequence(value: Any) -> list[Any]:
    """`value` if it is a list, else an empty one."""
    return value if isinstance(value, list) else []


__all__ = ["mapping", "sequence"]
