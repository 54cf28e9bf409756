"""`kvtier unittest-compare CHART...`: the real helm-unittest and pytest-helm-unittest on the same suites,
case by case (kvtier.unittest_compare); exit 1 on any difference in verdict or failed assertions."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from rich.console import Console

from kvtier import cliopts, exitcodes, unittest_compare
from kvtier.errors import UserError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "unittest-compare", help="compare pytest-helm-unittest with the real helm-unittest on charts"
    )
    p.add_argument("charts", nargs="+", type=Path, metavar="CHART", help="chart directories")
    p.add_argument(
        "--pattern",
        action="append",
        default=[],
        help=f"suite files, as helm-unittest's -f (repeatable; default {unittest_compare.DEFAULT_PATTERN})",
    )
    p.add_argument(
        "--no-subchart", action="store_true", help="leave out subcharts' suites (helm-unittest's -s=false)"
    )
    cliopts.add_output(p, json_alias=False)
    p.add_argument(
        "--json-file", type=Path, metavar="FILE", help="also write every case of both tools as JSON"
    )
    p.add_argument(
        "--json", type=Path, dest="json_file", action=cliopts.Deprecated, replacement="--json-file"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    as_json = args.output == "json"
    # With --output json stdout carries the cases only; the per-chart lines go to stderr.
    console = Console(highlight=False, stderr=as_json)
    for chart in args.charts:  # every chart before the first comparison (each takes a while)
        if not (chart / "Chart.yaml").is_file():
            raise UserError(f"{chart} is not a chart (no Chart.yaml)")
    rows, differing = [], 0
    for chart in args.charts:
        with tempfile.TemporaryDirectory(prefix="kvtier-unittest-compare-") as work:
            options = unittest_compare.Collection(tuple(args.pattern), not args.no_subchart)
            result = unittest_compare.compare(chart, Path(work), options)
        differences = result.differences
        differing += len(differences)
        status = "same" if not differences else f"{len(differences)} differ"
        counts = f"{len(result.real)} cases (helm-unittest), {len(result.plugin)} (plugin)"
        console.print(f"{chart}: {counts}: {status}")
        for (suite, it, n), (real, ours) in differences.items():
            occurrence = f" #{n}" if n > 1 else ""
            console.print(f"  {suite} :: {it}{occurrence}", style="bold")
            console.print(f"    helm-unittest: {real.show() if real else 'absent'}")
            console.print(f"    plugin:        {ours.show() if ours else 'absent'}")
        for key in sorted(result.real.keys() | result.plugin.keys()):
            real, ours = result.real.get(key), result.plugin.get(key)
            rows.append({
                "chart": str(chart), "suite": key[0], "it": key[1], "occurrence": key[2],
                "helm_unittest": real.show() if real else None, "plugin": ours.show() if ours else None,
            })  # fmt: skip
    if args.json_file:
        try:
            args.json_file.write_text(json.dumps(rows, indent=1) + "\n")
        except OSError as error:
            raise UserError(
                f"--json-file {args.json_file}: cannot write ({error.strerror or error})"
            ) from None
    if as_json:
        print(json.dumps(rows, indent=1))
    console.print(f"{len(rows)} case(s) compared, {differing} difference(s)")
    return exitcodes.FINDINGS if differing else exitcodes.OK
