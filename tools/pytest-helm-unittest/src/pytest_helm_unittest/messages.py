"""Failure text in helm-unittest's layout: DocumentIndex, Path, Expected, Actual, Diff."""

from __future__ import annotations

import difflib

from pytest_helm_unittest.goemit import trusted_dump


def yaml_text(value: object) -> str:
    return trusted_dump(value)


def _indent(text: str) -> str:
    return "\t" + text.replace("\n", "\n\t").strip("\n\t ")


def info(
    doc: int,
    value_index: int,
    *,
    path: str | None = None,
    label: str = "",
    negate: bool = False,
    expected: str | None = None,
    actual: str | None = None,
    diff: str | None = None,
) -> list[str]:
    """One failure block; any section given as None is left out."""
    lines: list[str] = []
    if doc >= 0:
        lines.append(f"DocumentIndex:\t{doc}")
    if value_index >= 0:
        lines.append(f"ValuesIndex:\t{value_index}")
    if path is not None:
        lines.append(f"Path:{_indent(path)}")
    if expected is not None:
        lines += [f"Expected{' NOT' if negate else ''}{label}:", *_indent(expected).split("\n")]
    if actual is not None:
        lines += ["Actual:", *_indent(actual).split("\n")]
    if diff is not None:
        lines += ["Diff:", *_indent(diff).split("\n")]
    return lines


def error(doc: int, value_index: int, message: str) -> list[str]:
    lines = ["Error:", *_indent(message).split("\n")]
    if value_index >= 0:
        lines.insert(0, f"ValuesIndex:\t{value_index}")
    if doc >= 0:
        lines.insert(0, f"DocumentIndex:\t{doc}")
    return lines


def unified_diff(expected: str, actual: str) -> str:
    return "".join(
        difflib.unified_diff(
            expected.splitlines(keepends=True), actual.splitlines(keepends=True), "Expected", "Actual", n=1
        )
    )
