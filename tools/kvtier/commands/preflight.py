"""`kvtier preflight FILE`: is this cluster ready for this environment? (pass/warn/fail per check)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kvtier import preflight
from kvtier.errors import UserError
from kvtier.preflight import inputs, report


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("preflight", help="check a live cluster before installing an environment")
    parser.add_argument("file", type=Path, help="the environment's values file (e.g. values/<env>.yaml)")
    parser.add_argument("--context", help="kubeconfig context (default: the current one)")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("--release", default="kvtier", help="Helm release name (default: %(default)s)")
    parser.add_argument(
        "-n", "--namespace", default="default", help="release namespace (default: %(default)s)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.file.is_file():
        raise UserError(f"{args.file}: no such values file (expected e.g. values/<environment>.yaml)")
    inputs.effective_values(args.file)  # a broken values file is reported before any cluster is contacted
    rest = preflight.connect(args.kubeconfig, args.context)
    results = preflight.run(args.file, args.release, args.namespace, rest)
    if args.json:
        print(
            report.as_json(
                results,
                file=str(args.file),
                release=args.release,
                namespace=args.namespace,
                server=rest.host,
            )
        )
    else:
        report.print_table(results)
    return preflight.exit_code(results)
