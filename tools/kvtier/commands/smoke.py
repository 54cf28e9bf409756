"""`kvtier smoke`: post-install checks against given URLs, else a release in the kubeconfig's cluster."""

from __future__ import annotations

import argparse
import json
from contextlib import ExitStack

from rich.console import Console

from kvtier import cliopts, exitcodes
from kvtier.errors import UserError
from kvtier.smoke import checks, reach, report


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "smoke",
        help="post-install checks: router, completion, cross-pod L2 hit, L2 files, Curvine workers",
        description="The checks the charts' `helm test` pods run (kvcheck.py) and a completion through the "
        "router: against URLs (no kubeconfig is read), else against the release in the cluster kubectl "
        "would use, reached through the API server's port-forward.",
    )
    urls = parser.add_argument_group("against URLs")
    urls.add_argument(
        "--router-url", type=cliopts.http_url, help="router base URL, e.g. http://127.0.0.1:8000"
    )
    urls.add_argument(
        "--replica-url",
        type=cliopts.http_url,
        action="append",
        default=[],
        help="an engine replica URL (give two)",
    )
    urls.add_argument("--l2-dir", help="the L2 directory, where this machine mounts it")
    urls.add_argument("--curvine-url", type=cliopts.http_url, help="Curvine master web URL")
    reach.add_cluster_arguments(parser)
    parser.add_argument("--model", help="model name (default: the router's first)")
    parser.add_argument("--l2", choices=("auto", "on", "off"), default="auto", help="is L2 enabled?")
    parser.add_argument("--curvine-workers", type=int, default=1, help="live workers expected")
    cliopts.add_output(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    url_mode = bool(args.router_url or args.replica_url or args.curvine_url or args.l2_dir)
    if url_mode and reach.cluster_flags_given(args):
        raise UserError(
            f"{', '.join(reach.cluster_flags_given(args))} reach a cluster, --router-url/--replica-url/"
            "--curvine-url/--l2-dir name URLs: give one kind"
        )
    if args.curvine_workers < 0:
        raise UserError(f"--curvine-workers must be >= 0, got {args.curvine_workers}")
    console = Console(stderr=True)
    with ExitStack() as stack:
        targets = _url_targets(args) if url_mode else _cluster_targets(args, stack)
        with console.status("smoke") as status:
            outcomes = checks.run_checks(targets, lambda check: status.update(f"smoke: {check}"))
    if args.output == "json":
        print(json.dumps(outcomes, indent=2, sort_keys=True))
    else:
        Console().print(report.table(outcomes))
    failed = [o for o in outcomes if o["status"] == checks.FAIL]
    return exitcodes.FINDINGS if failed else exitcodes.OK


def _l2(args: argparse.Namespace, detected: bool) -> bool:
    return {"on": True, "off": False}.get(args.l2, detected)


def _url_targets(args: argparse.Namespace) -> checks.Targets:
    if len(args.replica_url) == 1:
        raise UserError("--replica-url: give two replicas (A and B) for the cross-pod check, or none")
    return checks.Targets(
        router=args.router_url,
        replicas=args.replica_url,
        model=args.model,
        l2_enabled=_l2(args, bool(args.l2_dir)),
        l2_dir=args.l2_dir,
        curvine=args.curvine_url,
        curvine_workers=args.curvine_workers,
    )


def _cluster_targets(args: argparse.Namespace, stack: ExitStack) -> checks.Targets:
    reached = reach.reach_from_args(args, stack)
    return checks.Targets(
        router=reached.router,
        replicas=reached.replicas,
        model=args.model,
        l2_enabled=_l2(args, reached.l2_path is not None),
        l2_files=reached.l2_files,
        curvine=reached.curvine,
        curvine_workers=args.curvine_workers,
    )
