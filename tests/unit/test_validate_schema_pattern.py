r"""`kvtier validate` matches a schema's `pattern` as Helm does (Go's regexp: ASCII \d \w \s \b, `$` only at
the end of the text), not as Python's re does (kvtier.validate.layers.schema_pattern).

Oracle: Go's regexp/syntax documentation ("Perl character classes (all ASCII-only)"; `$` "at end of text
... or line (flag m=true)") and, for each case, the difference Python's re makes on the same pattern."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvtier import paths
from kvtier.validate.layers import schema_check
from kvtier.validate.layers.schema_pattern import compile_as_go

CURVINE = paths.SCHEMA / "curvine.values.schema.json"


def _errors_at(values: dict, where: list[str]) -> list[str]:
    found = schema_check.validator(CURVINE).iter_errors(values)
    return [e.validator for e in found if list(e.absolute_path) == where]


@pytest.mark.parametrize(
    ("size", "helm_takes"),
    [
        ("4MB", True),
        ("4 MB", True),
        ("4\tMB", True),
        ("4\u00a0MB", False),  # a no-break space: Unicode \s in Python, not in Go
        ("4\u2003MB", False),
        ("4MB\n", False),  # what a YAML block scalar (`|`) gives: Python's $ matches before it
        ("\u0664MB", False),  # an Arabic-Indic four: never a [0-9] digit, in either
    ],
)
def test_curvines_block_size_is_judged_as_helm_judges_it(size: str, helm_takes: bool) -> None:
    errors = _errors_at({"config": {"blockSize": size}}, ["config", "blockSize"])
    assert (errors == []) == helm_takes, errors


def test_a_data_dir_path_with_a_no_break_space_is_taken_as_helm_takes_it() -> None:
    r"""`^/[^\[\]\s]+$`: Go's \s leaves the no-break space out, so the set takes it; Python's refused it."""
    item = {"path": "/mnt/nvme\u00a0disk", "type": "SSD"}
    assert _errors_at({"worker": {"dataDirs": [item]}}, ["worker", "dataDirs", 0, "path"]) == []
    item["path"] = "/mnt/nvme disk"
    assert _errors_at({"worker": {"dataDirs": [item]}}, ["worker", "dataDirs", 0, "path"]) == ["pattern"]


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        (r"^a$", "a\n", False),
        (r"^a[$]$", "a$", True),  # a $ in a set is a member
        (r"^a\$$", "a$", True),  # an escaped $ is a literal
        (r"^[]$]+$", "]$]", True),  # ] first in a set is a member
        (r"^[^]$]+$", "ab", True),
        (r"^[^]$]+$", "a$", False),
        (r"^\w+$", "caf\u00e9", False),
        (r"^\d+$", "\u0661\u0662", False),
        (r"^x\b", "x\u00e9", True),  # é is no word character for Go's \b
        (r"^a\sb$", "a\vb", False),  # Go's \s is [\t\n\f\r ]: no \v
        (r"^[^\s]+$", "\v", True),
        (r"^\S+$", "\v", True),
    ],
)
def test_patterns_compile_with_gos_meaning(pattern: str, text: str, matches: bool) -> None:
    assert bool(compile_as_go(pattern).search(text)) == matches


@pytest.mark.filterwarnings("ignore::FutureWarning")  # "[[" draws Python's nested-set warning
@given(st.text(alphabet="ab$[]^\\\n", max_size=12), st.text(alphabet="ab$\n", max_size=6))
def test_without_dollar_or_a_final_newline_python_and_go_agree_on_ascii(pattern: str, text: str) -> None:
    """On ASCII text, the translation changes only what `$` does before a final newline."""
    try:
        python = re.compile(pattern)
    except re.error:
        return
    if not text.endswith("\n"):
        assert bool(compile_as_go(pattern).search(text)) == bool(python.search(text))
