"""Human output of `kvtier smoke`: one row per check with its result, summary and remedy."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from kvtier.smoke.checks import FAIL, PASS, SKIP


def table(outcomes: list[dict[str, Any]]) -> Table:
    rows = Table(title="kvtier smoke")
    for column in ("check", "result", "summary", "remedy"):
        rows.add_column(column)
    style = {PASS: "green", FAIL: "red", SKIP: "yellow"}
    for o in outcomes:
        # Text, never markup: summaries quote model names and engine answers.
        status = Text(o["status"], style=style[o["status"]])
        rows.add_row(Text(o["id"]), status, Text(o["summary"]), Text(o.get("remedy", "")))
    return rows
