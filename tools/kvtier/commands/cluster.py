"""`kvtier cluster up|down|status`: the local control plane the cluster tests and preflight use."""

from __future__ import annotations

import argparse
import json

from kvtier import exitcodes
from kvtier.cluster import lifecycle


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "cluster", help="start/stop a real Kubernetes control plane with fake (KWOK) nodes on loopback"
    )
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument("--name", default=lifecycle.DEFAULT_NAME, help="cluster name (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds to wait for start-up")
    parser.add_argument("--json", action="store_true", help="status as JSON")
    parser.add_argument(
        "--no-build", action="store_true", help="fail instead of building missing binaries (up only)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "up":
        info = lifecycle.up(args.name, timeout=args.timeout, build=not args.no_build)
        print(info.kubeconfig)
        return exitcodes.OK
    if args.action == "down":
        gone = lifecycle.down(args.name)
        print(f"cluster {args.name!r} {'deleted' if gone else 'does not exist'}")
        return exitcodes.OK
    state = lifecycle.status(args.name)
    if args.json:
        print(json.dumps(state, indent=2))
    else:
        for key, value in state.items():
            print(f"{key:16} {value}")
    return exitcodes.OK if state["ready"] else exitcodes.FINDINGS
