"""validate's human report prints every character of what it reports: values paths, rule reasons and
messages hold brackets (`models[qwen2-7b]`, `capabilities.drop: [ALL]`) that rich would otherwise read as
its own markup and drop."""

from __future__ import annotations

import io

from rich.console import Console

from kvtier.validate import report
from kvtier.validate.findings import FileReport, Finding

BRACKETED = Finding(
    "rules",
    "policy-security-context",
    "container [engine] of models[qwen2-7b] has no securityContext",
    "env[prod].yaml",
    line=3,
    column=5,
    path="models[qwen2-7b].securityContext",
    suggestion="set capabilities.drop: [ALL] per container",
)


def _printed(reports: list[FileReport]) -> str:
    out = io.StringIO()
    report.print_human(reports, Console(file=out, width=400, color_system=None))
    return out.getvalue()


def test_brackets_in_findings_are_printed_as_written() -> None:
    env = FileReport("env[prod].yaml")
    env.add("rules", [BRACKETED])
    text = _printed([env])
    for written in (
        "container [engine] of models[qwen2-7b] has no securityContext",
        "models[qwen2-7b].securityContext",
        "capabilities.drop: [ALL]",
        "env[prod].yaml",
        "policy-security-context",
    ):
        assert written in text, written


def test_the_rule_listing_prints_brackets_too() -> None:
    out = io.StringIO()
    listed = [
        {"id": "r", "scope": "manifests", "row": "policy", "reason": "why [x]", "remedy": "drop: [ALL]"}
    ]
    report.print_rules(listed, Console(file=out, width=400, color_system=None))
    assert "why [x]" in out.getvalue() and "drop: [ALL]" in out.getvalue()
