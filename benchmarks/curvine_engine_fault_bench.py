#!/usr/bin/env python3
"""Curvine's faults across two real nodes under the engines' soak load, every answer held to its reference
(issue 63, item 4).

One two-node real-node cluster of its own (engfault-<pid>, taken down at the end), Curvine laid out as
production runs it (curvine_release.install(spread=True): three Raft masters, a worker and a CSI node
plugin per node), the engine image in both nodes, and values/cpu.yaml's umbrella (umbrella_cpu's overlay,
as the node tests install it) with its L2 on Curvine's StorageClass and its two engines one per node (the
chart's engine.topologySpread, DoNotSchedule, as tests/node/test_two_node_umbrella.py). Then `kvtier soak`
against that release, the CLI itself, run inside the cluster's network namespace (where the API server
and the pods' addresses are): each prompt's greedy reference from the release one request at a time, then
the mix under each fault in turn, by default `none` (the baseline), `curvine-leader` (the Raft leader
master's pod deleted) and `curvine-worker` (one worker pod forced).

    .venv/bin/python benchmarks/curvine_engine_fault_bench.py [--faults none,curvine-leader,curvine-worker]
        [--requests 20] [--qps 1] [--backend lmcache|vllm-native] [--set KEY=VALUE ...] [--out DIR]

Prints the soak's table (requests, failed, cut short, wrong answers: the goal is 0 wrong), the machine's
load average before and after, and the exact soak command; DIR/soak.json holds the rows.

Needs root, the node programs (make node-tools), the engine venv (make engine) and the Curvine binaries
(KVTIER_CURVINE_BIN or ../shared). Exit 0 when the soak was clean (every fault injected, no wrong answer,
no unexplained failure), 1 when not, 2 when the cluster, Curvine or the release cannot start.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from kvtier import helm, paths
from kvtier.cluster.realnode import curvine_binaries, curvine_release, images, umbrella_cpu
from kvtier.cluster.realnode import lifecycle as realnode
from kvtier.cluster.realnode.client import Kube
from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig import tiers
from kvtier.engine_rig.errors import RigError
from kvtier.errors import UserError
from kvtier.load import experiment, soak

RELEASE = "kv"
FAULTS = "none,curvine-leader,curvine-worker"
SOAK_TIMEOUT_S = 3600


def _one_engine_per_node(kube: Kube, ns: str) -> dict[str, str]:
    """Engine pod -> node, checked to be one on each node (the chart's DoNotSchedule spread)."""
    placed = {
        p["metadata"]["name"]: p["spec"].get("nodeName", "")
        for p in umbrella_cpu.pods(kube, ns, RELEASE, "engine")
    }
    if sorted(placed.values()) != sorted(node.name for node in kube.cluster.nodes):
        raise UserError(f"{ns}: expected one engine on each node, found {placed}")
    return placed


def soak_argv(
    cluster: realnode.RealCluster, ns: str, installed: curvine_release.Installed, args: argparse.Namespace,
    tokenizer: Path, out: Path,
) -> list[str]:  # fmt: skip
    """`kvtier soak` against the release, its Curvine found by its own release's labels and namespace."""
    masters = f"app.kubernetes.io/instance={installed.release},app.kubernetes.io/component=master"
    return [
        str(paths.ROOT / ".venv" / "bin" / "kvtier"), "soak", "--kubeconfig", str(cluster.kubeconfig),
        "-n", ns, "--release", RELEASE, "--faults", args.faults, "--requests", str(args.requests),
        "--qps", str(args.qps), "--max-prompt-tokens", str(experiment.RIG_MAX_PROMPT),
        "--model", engine_rig.MODEL_NAME, "--tokenizer", str(tokenizer),
        "--curvine-namespace", installed.namespace, "--curvine-selector", masters, "--out", str(out),
    ]  # fmt: skip


def run(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    def progress(message: str) -> None:
        console.print(f"[dim]{message}", highlight=False)

    name = f"engfault-{os.getpid()}"
    cluster = realnode.up(name, progress=progress, nodes=2)
    try:
        kube = Kube(cluster)
        image = images.engine(progress, engine_rig.engine_python().parent.parent.resolve())
        umbrella_cpu.import_into_every_node(cluster, [image], progress)
        values = umbrella_cpu.overlay(cluster, image.ref, backend=args.backend)
        values["engine"]["topologySpread"] = {
            "enabled": True,
            "maxSkew": 1,
            "whenUnsatisfiable": "DoNotSchedule",
        }
        helm.build_dependencies(umbrella_cpu.UMBRELLA)
        with curvine_release.raised_pipe_max_size(), tempfile.TemporaryDirectory(prefix="engfault-") as work:
            extra = [arg for setting in args.settings for arg in ("--set", setting)]
            installed = curvine_release.install(kube, "curvine", progress, *extra, spread=True)
            prepared = umbrella_cpu.prepare(kube, f"ef-{os.getpid()}", values, installed.storage_class)
            progress("helm install (two engines, one per node, L2 on Curvine)")
            install_s = umbrella_cpu.rollout(kube, prepared, "install", RELEASE)
            placed = _one_engine_per_node(kube, prepared.namespace)
            tokenizer = engine_rig.generate_model(Path(work) / engine_rig.MODEL_NAME)
            argv = soak_argv(cluster, prepared.namespace, installed, args, tokenizer, args.out)
            progress(f"soak: {shlex.join(argv)}")
            load_before = os.getloadavg()
            started = time.monotonic()
            proc = subprocess.run(
                cluster.command(argv), capture_output=True, text=True, timeout=SOAK_TIMEOUT_S
            )
            soak_s = time.monotonic() - started
            load_after = os.getloadavg()
    finally:
        realnode.down(name, progress=progress)
    rows_file = args.out / "soak.json"
    if not rows_file.exists():
        raise UserError(f"the soak wrote no rows (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": shlex.join(argv),
        "exit": proc.returncode,
        "install_to_ready_s": round(install_s, 1),
        "engines": placed,
        "load_before": [round(x, 1) for x in load_before],
        "load_after": [round(x, 1) for x in load_after],
        "soak_s": round(soak_s, 1),
        "log_tail": proc.stderr[-3000:],
        "rows": json.loads(rows_file.read_text()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faults", default=FAULTS, help=f"the soak's faults, in order (default {FAULTS})")
    parser.add_argument("--requests", type=int, default=20, help="requests per fault")
    parser.add_argument("--qps", type=float, default=1.0, help="offered request rate (two CPU engines)")
    parser.add_argument(
        "--backend", choices=(tiers.LMCACHE, tiers.NATIVE), default=tiers.LMCACHE,
        help="the engines' KV connector (cache.backend)",
    )  # fmt: skip
    parser.add_argument(
        "--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
        help="a value for the Curvine chart, as helm --set (repeatable)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="folder for soak.json")
    args = parser.parse_args()
    console = Console(width=160)
    unknown = [f for f in args.faults.split(",") if f not in soak.FAULTS]
    if unknown:
        console.print(
            f"[red]engine fault bench: --faults: {unknown[0]!r} is not one of {','.join(soak.FAULTS)}"
        )
        return 2
    reasons = realnode.preconditions() + [r for r in [curvine_binaries.missing()] if r]
    if reasons:
        console.print(f"[red]engine fault bench: cannot run here: {'; '.join(reasons)}")
        return 2
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        payload = run(args, console)
    except (UserError, RigError, AssertionError, subprocess.TimeoutExpired) as error:
        console.print(f"[red]engine fault bench: {error}")
        return 2
    (args.out / "curvine-engine-faults.json").write_text(json.dumps(payload, indent=2) + "\n")
    console.print(payload["log_tail"], markup=False, highlight=False)
    print(soak.table(payload["rows"]))
    print(
        f"{payload['date']}; engines {payload['engines']}; "
        f"install to Ready {payload['install_to_ready_s']} s; "
        f"soak {payload['soak_s']} s, exit {payload['exit']}; load average before {payload['load_before']}, "
        f"after {payload['load_after']}\n{payload['command']}"
    )
    return 0 if soak.clean(payload["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
