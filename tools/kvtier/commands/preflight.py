"""`kvtier preflight FILE`: is this cluster ready for this environment? (pass/warn/fail per check)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kvtier import cliopts, preflight
from kvtier.errors import UserError
from kvtier.preflight import inputs, report


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("preflight", help="check a live cluster before installing an environment")
    parser.add_argument("file", type=Path, help="the environment's values file (e.g. values/<env>.yaml)")
    cliopts.add_cluster(parser, "the namespace to install into")
    parser.add_argument("--release", default="kvtier", help="Helm release name (default: %(default)s)")
    cliopts.add_output(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.file.exists():
        raise UserError(f"{args.file}: no such values file (expected e.g. values/<environment>.yaml)")
    inputs.effective_values(args.file)  # a broken values file is reported before any cluster is contacted
    kube = cliopts.resolve(args)
    rest = preflight.connect(kube.kubeconfig, kube.context)
    results = preflight.run(args.file, args.release, kube.namespace, rest)
    if args.output == "json":
        print(
            report.as_json(
                results,
                file=str(args.file),
                release=args.release,
                namespace=kube.namespace,
                server=rest.host,
            )
        )
    else:
        report.print_table(results)
    return preflight.exit_code(results)
