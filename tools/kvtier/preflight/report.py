"""Preflight results as a table for people or JSON for machines."""

from __future__ import annotations

import json
from collections import Counter

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kvtier.preflight.model import Result
from kvtier.preflight.rules import RULES

STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def as_json(results: list[Result], **context: str) -> str:
    rows = [
        {
            "id": r.rule,
            "status": r.status,
            "detail": r.detail,
            "reason": RULES[r.rule].reason,
            "remedy": RULES[r.rule].remedy if r.status in ("warn", "fail") else "",
        }
        for r in results
    ]
    return json.dumps(
        {**context, "summary": dict(Counter(r.status for r in results)), "checks": rows}, indent=2
    )


def print_table(results: list[Result], console: Console | None = None) -> None:
    console = console or Console()
    table = Table(show_lines=True)
    for column in ("check", "status", "detail", "remedy"):
        table.add_column(column, overflow="fold")
    for r in results:
        remedy = RULES[r.rule].remedy if r.status in ("warn", "fail") else ""
        # Text, never markup: details quote cluster names and values that may hold brackets.
        table.add_row(Text(r.rule), Text(r.status, style=STYLE[r.status]), Text(r.detail), Text(remedy))
    console.print(table)
    counts = Counter(r.status for r in results)
    console.print(", ".join(f"{counts[s]} {s}" for s in ("pass", "warn", "fail", "skip") if counts[s]))
