"""`kvtier cluster up|down|status|exec`: the local clusters the cluster tests and preflight use.

Two flavours (docs/cluster.md): `--runtime kwok` (default), a real control plane with fake KWOK nodes on
loopback; `--runtime real`, a real node (kubelet, containerd) inside a network namespace of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess

from kvtier import cliopts, exitcodes, paths
from kvtier.cluster.common import names
from kvtier.cluster.kwok import lifecycle
from kvtier.cluster.realnode import lifecycle as realnode
from kvtier.cluster.realnode import netns
from kvtier.errors import UserError


def _name(text: str) -> str:
    if not names.valid(text):
        raise argparse.ArgumentTypeError(f"{text!r}: expected {names.RULE} (e.g. kvtier, n1)")
    return text


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "cluster",
        help="start/stop a local Kubernetes cluster: fake KWOK nodes on loopback, or a real node in a netns",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--name", type=_name, default=lifecycle.DEFAULT_NAME, help="cluster name (default: %(default)s)"
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = actions.add_parser("up", parents=[common], help="start a cluster (or reuse the running one)")
    up.add_argument(
        "--runtime",
        choices=["kwok", "real"],
        default="kwok",
        help="kwok = fake nodes on loopback (default); real = a real kubelet + containerd in a network "
        "namespace (root; its programs: `make node-tools`)",
    )
    up.add_argument(
        "--nodes",
        type=int,
        default=1,
        help="nodes of a --runtime real cluster, 1 or 2 (default: %(default)s)",
    )
    up.add_argument("--timeout", type=float, default=300, help="seconds to wait for start-up")
    up.add_argument("--no-build", action="store_true", help="fail instead of building missing binaries")
    actions.add_parser("down", parents=[common], help="stop a cluster and put the machine back")
    status = actions.add_parser("status", parents=[common], help="is it up, where, which nodes")
    cliopts.add_output(status)
    run_in = actions.add_parser(
        "exec",
        parents=[common],
        help="run a command inside a real-node cluster's network namespace, with KUBECONFIG set",
    )
    run_in.add_argument(
        "argv", nargs=argparse.REMAINDER, help="the command, after `--` (kubectl get pods -A)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    real = getattr(args, "runtime", "") == "real" or realnode.exists(args.name)
    if args.action == "up":
        if not args.timeout > 0:
            raise UserError(f"--timeout must be a positive number of seconds, got {args.timeout}")
        if args.runtime == "real":
            info = realnode.up(args.name, timeout=args.timeout, build=not args.no_build, nodes=args.nodes)
            print(info.kubeconfig)
            return exitcodes.OK
        if args.nodes != 1:
            raise UserError(
                f"--nodes {args.nodes}: only a --runtime real cluster starts more than one node"
                " (a KWOK cluster's fake nodes are its own); add --runtime real or drop --nodes"
            )
        if realnode.exists(args.name):
            raise UserError(
                f"cluster {args.name!r} runs the real-node flavour: `up --runtime real`, or another --name"
            )
        kwok = lifecycle.up(args.name, timeout=args.timeout, build=not args.no_build)
        print(kwok.kubeconfig)
        return exitcodes.OK
    if args.action == "down":
        gone = realnode.down(args.name) if real else lifecycle.down(args.name)
        print(f"cluster {args.name!r} {'deleted' if gone else 'does not exist'}")
        return exitcodes.OK
    if args.action == "exec":
        return _exec(args)
    state = realnode.status(args.name) if real else lifecycle.status(args.name)
    if args.output == "json":
        print(json.dumps(state, indent=2))
    else:
        for key, value in state.items():
            print(f"{key:16} {value}")
    return exitcodes.OK if state["ready"] else exitcodes.FINDINGS


def _exec(args: argparse.Namespace) -> int:
    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not command:
        raise UserError(
            f"exec --name {args.name}: nothing to run; give the command after `--` "
            f"(kvtier cluster exec --name {args.name} -- kubectl get pods -A)"
        )
    if not realnode.exists(args.name):
        raise UserError(
            f"exec: no real-node cluster {args.name!r}"
            f" (`kvtier cluster up --runtime real --name {args.name}`);"
            " a KWOK cluster is on loopback and needs no exec"
        )
    env = {
        **os.environ,
        "KUBECONFIG": str(realnode.layout(args.name).kubeconfig),
        "PATH": f"{paths.ROOT / '.tools' / 'bin'}:{os.environ.get('PATH', '')}",
    }
    return subprocess.run(netns.command(netns.name_for(args.name), command), env=env).returncode
