"""`kvtier package`: package both charts at their Chart.yaml versions and push them to an OCI registry."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from kvtier import cliopts, exitcodes, paths
from kvtier.publish import package
from kvtier.publish.registry import Registry


def _chart(name: str) -> str:
    if not name.strip():
        raise argparse.ArgumentTypeError(
            "an empty chart name; give a folder name under charts/ (e.g. curvine)"
        )
    return name


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "package",
        help="package the charts and push them to an OCI registry (never overwrites a version)",
        description="Build dependencies, package every chart at its Chart.yaml version and `helm push` it. "
        "Credentials: a previous `helm registry login`, or --username with --password-stdin "
        "(or KVTIER_REGISTRY_USERNAME / KVTIER_REGISTRY_PASSWORD).",
    )
    parser.add_argument(
        "--registry",
        default=os.environ.get("KVTIER_REGISTRY"),
        help="oci://HOST[:PORT]/PATH to push to (env KVTIER_REGISTRY)",
    )
    parser.add_argument(
        "--chart", type=_chart, action="append", help="publish only this chart (repeatable; default: all)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="check, package and look up the registry, but push nothing"
    )
    parser.add_argument(
        "--username", default=os.environ.get("KVTIER_REGISTRY_USERNAME"), help="registry user"
    )
    parser.add_argument(
        "--password-stdin",
        action="store_true",
        help="read the password or token from stdin (else KVTIER_REGISTRY_PASSWORD)",
    )
    parser.add_argument(
        "--registry-config", type=Path, help="Helm registry config holding credentials (default: Helm's own)"
    )
    parser.add_argument(
        "--plain-http", action="store_true", help="HTTP instead of TLS (loopback registries only)"
    )
    parser.add_argument(
        "--helm", type=int, choices=(3, 4), default=3, help="pinned Helm major to use (default 3)"
    )
    parser.add_argument(
        "--destination", type=Path, default=paths.ROOT / "dist" / "charts", help="where the .tgz files go"
    )
    cliopts.add_output(parser, json_alias=False)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    registry = (
        Registry(args.registry, args.plain_http, args.registry_config, args.helm) if args.registry else None
    )
    password = sys.stdin.read().strip() if args.password_stdin else os.environ.get("KVTIER_REGISTRY_PASSWORD")
    charts = package.discover(args.chart)
    outcomes, findings = package.publish(
        charts, registry, args.destination, dry_run=args.dry_run, username=args.username, password=password
    )
    for finding in findings:
        print(finding, file=sys.stderr)
    if args.output == "json":
        rows = [{**dataclasses.asdict(o), "package": str(o.package)} for o in outcomes]
        problems = [
            {"rule": f.rule, "file": str(f.path), "line": f.line, "message": f.message} for f in findings
        ]
        print(json.dumps({"charts": rows, "findings": problems}, indent=2))
    elif outcomes:
        width = max(len(o.chart) for o in outcomes)
        for o in outcomes:
            where = o.reference or str(o.package)
            print(f"{o.chart:<{width}}  {o.version:<10}  {o.action:<10}  {where}  {o.digest}".rstrip())
    if findings:
        print("nothing was pushed", file=sys.stderr)
        return exitcodes.FINDINGS
    return exitcodes.OK
