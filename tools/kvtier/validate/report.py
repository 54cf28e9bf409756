"""Human (rich tables) and JSON output of `kvtier validate`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kvtier.validate.findings import FAILED, OK, UNAVAILABLE, WARNED, FileReport, Finding

STYLE = {OK: "green", FAILED: "bold red", WARNED: "yellow", UNAVAILABLE: "yellow"}
MARK = {OK: "✓", FAILED: "✗", WARNED: "!", UNAVAILABLE: "n/a"}


def _name(file: str) -> str:
    return Path(file).stem


def _order(reports: list[FileReport]) -> list[str]:
    seen: dict[str, None] = {}
    for r in reports:
        for check in r.checks:
            seen.setdefault(check, None)
    return list(seen)


def summary(reports: list[FileReport]) -> tuple[Table, list[str]]:
    """One column per environment, one row per check; long reasons become numbered notes (shared)."""
    table = Table(title="kvtier validate: summary per environment", title_justify="left")
    table.add_column("check", style="bold", no_wrap=True)  # a check name is what readers scan for
    for r in reports:
        table.add_column(Text(_name(r.file)), overflow="fold")
    notes: list[str] = []
    for check in _order(reports):
        cells = []
        for r in reports:
            status = r.checks.get(check)
            if status is None:
                cells.append(Text("-", style="dim"))
                continue
            mark = MARK.get(status.status, "-")
            detail = status.detail
            if status.status in (OK, FAILED, WARNED) and len(detail) <= 24:
                cells.append(Text(f"{mark} {detail}".strip(), style=STYLE.get(status.status, "")))
                continue
            if detail not in notes:
                notes.append(detail)
            label = mark if status.status != "skipped" else "skipped"
            cells.append(Text(f"{label} [{notes.index(detail) + 1}]", style=STYLE.get(status.status, "dim")))
        table.add_row(Text(check), *cells)
    return table, notes


def _family(check: str) -> tuple[str, str]:
    """("k8s", "1.30") for a per-minor check, ("render", "helm3") for a render; (check, "") otherwise."""
    for family in ("k8s", "render"):
        if check.startswith(family + " "):
            return family, check.removeprefix(family + " ")
    return check, ""


def _grouped(findings: list[Finding]) -> list[tuple[Finding, str, str]]:
    """The same problem at several Kubernetes minors or Helm majors becomes one row ("k8s 1.30-1.35")."""
    groups: dict[tuple[str, ...], list[Finding]] = {}
    for f in findings:
        family, member = _family(f.check)
        message = f.message.replace(member, "{}") if member else f.message
        groups.setdefault((f.rule, f.subject, f.path, message, family), []).append(f)
    out = []
    for members in groups.values():
        first = members[0]
        family, member = _family(first.check)
        if len(members) == 1:
            out.append((first, first.check, first.message))
            continue
        names = [_family(m.check)[1] for m in members]
        span = f"{names[0]}-{names[-1]}" if family == "k8s" else "/".join(names)
        out.append((first, f"{family} {span}", first.message.replace(member, span)))
    return out


def findings_table(report: FileReport) -> Table:
    table = Table(title=Text(f"{report.file}: {len(report.findings)} finding(s)"), title_justify="left")
    for column in ("where", "check", "key / object", "problem", "fix"):
        table.add_column(column, overflow="fold")
    for f, check, message in _grouped(report.findings):
        where = f"{Path(f.file).name}:{f.line}:{f.column}" if f.line else (f.subject or Path(f.file).name)
        problem = message + (f"\nexpected: {f.expected}" if f.expected else "")
        # Text, never markup: values paths and messages carry brackets (`models[qwen2-7b]`, `[ALL]`).
        table.add_row(
            Text(where),
            Text.assemble(f"{check}\n", (f.rule, "dim")),
            Text(f.path),
            Text(problem),
            Text(f.suggestion or ""),
            style="red" if f.severity == "error" else "yellow",
        )
    return table


def print_human(reports: list[FileReport], console: Console | None = None) -> None:
    console = console or Console(width=max(Console().width, 140))
    for r in reports:
        if r.fatal:
            console.print(Text(f"unusable input: {r.fatal}", style="bold red"))
    table, notes = summary([r for r in reports if not r.fatal])
    if table.columns and len(table.columns) > 1:
        console.print(table)
        for i, note in enumerate(notes, 1):
            console.print(Text(f"[{i}] {note}", style="dim"))
    for r in reports:
        if r.findings:
            console.print(findings_table(r))
    warnings = sum(1 for r in reports for f in r.findings if f.severity != "error")
    ok = sum(1 for r in reports if not r.fatal and not r.failed)
    bad = sum(1 for r in reports if not r.fatal and r.failed)
    fatal = sum(1 for r in reports if r.fatal)
    console.print(
        Text(
            f"{len(reports)} environment(s): {ok} ok, {bad} with findings, {fatal} unusable"
            + (f" ({warnings} warning(s))" if warnings else ""),
            style="bold green" if not bad and not fatal else "bold red",
        )
    )


def to_json(reports: list[FileReport], exit_code: int) -> str:
    data: dict[str, Any] = {"exit_code": exit_code, "environments": [r.to_json() for r in reports]}
    return json.dumps(data, indent=2)


def rules_json(listed: list[dict[str, str]]) -> str:
    """`--list-rules --output json`: the rule catalogue as data."""
    return json.dumps(listed, indent=2)


def print_rules(listed: list[dict[str, str]], console: Console | None = None) -> None:
    """`--list-rules`: one row per rule (id, what it reads, summary row, why, what to do)."""
    table = Table(title="kvtier validate rules", title_justify="left")
    for column in ("id", "reads", "reported under", "why", "what to do"):
        table.add_column(column, overflow="fold")
    for r in listed:
        table.add_row(*(Text(r[k]) for k in ("id", "scope", "row", "reason", "remedy")))
    (console or Console(width=max(Console().width, 140))).print(table)
