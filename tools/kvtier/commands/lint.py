"""`kvtier lint`: ct lint's checks per chart (version bump, yamale, yamllint, helm lint per CI values)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from kvtier import cliopts, exitcodes, helm, lint


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("lint", help="lint every chart as chart-testing's `ct lint` does")
    p.add_argument("--helm", default="3", help="Helm majors for `helm lint` (default 3, as ct; e.g. 3,4)")
    p.add_argument("--ct", action="store_true", help="also run the real `ct lint` with ct.yaml")
    cliopts.add_output(p, json_alias=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    majors = helm.majors(args.helm)
    results, note = lint.lint(majors)
    if args.output == "json":
        return _json(args, results, note)
    console = Console(width=max(Console().width, 140))
    table = Table(title=f"kvtier lint (target: {note})", title_justify="left")
    table.add_column("chart", style="bold")
    table.add_column("check")
    table.add_column("result", overflow="fold")
    for result in results:
        for step, outcome in result.steps.items():
            style = "green" if outcome == "ok" else "dim" if outcome.startswith("skipped") else "red"
            table.add_row(result.chart, step, outcome, style=style)
    console.print(table)
    failed = any(r.failed for r in results)
    if args.ct:
        remote, branch, _ = lint.target_ref()
        ct = lint.run_ct(remote, branch)
        console.print(ct.stdout[-3000:] + ct.stderr[-2000:], markup=False, highlight=False)
        console.print(f"ct lint exit code {ct.returncode}", style="green" if ct.returncode == 0 else "red")
        failed = failed or ct.returncode != 0
    return exitcodes.FINDINGS if failed else exitcodes.OK


def _json(args: argparse.Namespace, results: list[lint.ChartLint], note: str) -> int:
    report: dict[str, Any] = {
        "target": note,
        "charts": [{"chart": r.chart, "steps": r.steps, "failed": r.failed} for r in results],
    }
    failed = any(r.failed for r in results)
    if args.ct:
        remote, branch, _ = lint.target_ref()
        ct = lint.run_ct(remote, branch)
        report["ct"] = {"exit_code": ct.returncode, "output": (ct.stdout[-3000:] + ct.stderr[-2000:])}
        failed = failed or ct.returncode != 0
    print(json.dumps(report, indent=2))
    return exitcodes.FINDINGS if failed else exitcodes.OK
