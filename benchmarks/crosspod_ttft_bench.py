#!/usr/bin/env python3
"""Cross-pod time to first token through Curvine's FUSE against the hostPath stand-in, in one run.

One real-node cluster of its own (kvtier.cluster.realnode) with charts/curvine installed as the node tests
install it (kvtier.cluster.realnode.curvine_release) and the engine image imported once. The umbrella
(values/cpu.yaml: two CPU vLLM engines, LMCache, sealed L2 files; umbrella_cpu's overlay, as the node
tests install it) is installed twice, same values and image, each release in a namespace of its own: one
with its L2 on a hostPath claim, one on a Curvine claim. The trials then alternate between the releases,
one trial at a time (the first backend alternating too), so a noisy stretch of the machine falls on both;
only one engine computes at a time, the other three idle.

`--nodes 2` (issue 63 item 5: a cross-node hit) starts a two-node cluster instead, imports the engine image
into both nodes, lays Curvine out as production runs it (curvine_release.install(spread=True): three
masters, a worker per node) and requires each release's engines on different nodes (the chart's own
`engine.topologySpread`, DoNotSchedule, as test_two_node_umbrella): A on node 1, B on node 2, checked by
the pods' spec.nodeName. The stand-in stays a hostPath claim with no node affinity: both nodes are private
mount namespaces of this one machine, so both see the same host folder (and one page cache), the ideal
shared filesystem, which Curvine's cross-node read through the writer node's worker is measured against.

    .venv/bin/python benchmarks/crosspod_ttft_bench.py [--nodes 1|2] [--trials 8] [--min-tokens 1000]
        [--max-tokens 1900] [--backend lmcache|vllm-native] [--set worker.hostNetwork=false ...]
        [-o table|json] [--out DIR]

A trial (kvtier.bench.crosspod_probe, inside the cluster's network namespace against a release's two
engine pods): a fresh prompt to pod A, then to pod B, whose TTFT and connector hit tokens are recorded (no
hit: the trial is invalid and counted), and a fresh prompt nobody stored to B (the cold baseline). Trial
number i draws the same prompt length on both backends. One warm-up trial per release is left out. Prints
per backend the median and p95 of B's hit and cold TTFT, the hit tokens, the hit-vs-cold speed-up, the
load average the trials ran at, and Curvine / hostPath.

Needs root, the node programs (make node-tools), the engine venv (make engine) and the Curvine binaries
(KVTIER_CURVINE_BIN or ../shared). Exit 0 when Curvine's median cross-pod hit TTFT is within the goal of
the stand-in's (1.25x on one node, 1.5x across two), 1 when not (or a backend had no valid trial), 2 when
the cluster, Curvine or an install cannot start.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kvtier import cliopts, helm
from kvtier.bench import crosspod_summary
from kvtier.cluster.realnode import curvine_binaries, curvine_release, images, umbrella_cpu
from kvtier.cluster.realnode import lifecycle as realnode
from kvtier.cluster.realnode.client import Kube
from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig import tiers
from kvtier.engine_rig.errors import RigError
from kvtier.errors import UserError
from kvtier.load import experiment
from kvtier.plan.facts import REFERENCE

RELEASE = "kv"
# Curvine's hit TTFT over the stand-in's, by node count: issue 55 (one node), issue 63 item 5 (across nodes)
GOALS = {1: 1.25, 2: 1.5}
ENGINE_PORT = 8000
BACKENDS = ("hostPath", "curvine")


def _engines(kube: Kube, ns: str) -> list[str]:
    """The release's two engine pods' URLs, A first: by pod name on one node, else A the one on node 1 and
    B the one on node 2."""
    engines = sorted(umbrella_cpu.pods(kube, ns, RELEASE, "engine"), key=lambda p: p["metadata"]["name"])
    if len(engines) != 2:
        raise UserError(f"expected 2 engine pods in {ns}, found {len(engines)}")
    if len(kube.cluster.nodes) > 1:
        placed = {p["spec"].get("nodeName", ""): p for p in engines}
        wanted = [node.name for node in kube.cluster.nodes]
        if sorted(placed) != sorted(wanted):
            where = {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in engines}
            raise UserError(
                f"{ns}: expected one engine on each of {wanted}, found {where}: the chart's "
                "engine.topologySpread (DoNotSchedule) did not spread them"
            )
        engines = [placed[name] for name in wanted]
    return [f"http://{p['status']['podIP']}:{ENGINE_PORT}" for p in engines]


def _probe(kube: Kube, engines: list[str], args: argparse.Namespace, number: int, warmup: int) -> list[dict]:
    """One probe run inside the cluster's network namespace: `warmup` left-out trials, else one trial."""
    a, b = engines
    argv = [sys.executable, "-m", "kvtier.bench.crosspod_probe", "--a", a, "--b", b]
    argv += ["--model", engine_rig.MODEL_NAME, "--number", str(number)]
    argv += ["--trials", "0" if warmup else "1", "--warmup", str(warmup)]
    argv += ["--min-tokens", str(args.min_tokens), "--max-tokens", str(args.max_tokens)]
    out = kube.run(argv, timeout=900)  # stdout only; a failed probe raises with its output
    result = json.loads(out.strip().splitlines()[-1])
    if "error" in result:
        raise UserError(f"cross-pod probe against {a} and {b}: {result['error']}")
    return list(result["trials"])


def _measure(
    kube: Kube, releases: dict[str, list[str]], args: argparse.Namespace, progress: Any
) -> dict[str, list[dict[str, Any]]]:
    """Every backend's trials, interleaved one at a time, after one warm-up trial each."""
    trials: dict[str, list[dict[str, Any]]] = {backend: [] for backend in releases}
    for engines in releases.values():
        _probe(kube, engines, args, number=-1, warmup=1)
    for number in range(args.trials):
        order = list(releases) if number % 2 == 0 else list(reversed(releases))
        progress(f"trial {number + 1}/{args.trials}: {', '.join(order)}")
        for backend in order:
            trials[backend] += _probe(kube, releases[backend], args, number, warmup=0)
    return trials


def run(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    def progress(message: str) -> None:
        console.print(f"[dim]{message}", highlight=False)

    name = f"xpttft-{os.getpid()}"
    cluster = realnode.up(name, progress=progress, nodes=args.nodes)
    spread = args.nodes > 1
    results: dict[str, Any] = {}
    try:
        kube = Kube(cluster)
        image = images.engine(progress, engine_rig.engine_python().parent.parent.resolve())
        umbrella_cpu.import_into_every_node(cluster, [image], progress)
        values = umbrella_cpu.overlay(cluster, image.ref, backend=args.backend)
        if spread:  # one engine per node, required (values/prod-g6e-4xlarge.yaml sets it so)
            topology = {"enabled": True, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}
            values["engine"]["topologySpread"] = topology
        helm.build_dependencies(umbrella_cpu.UMBRELLA)
        with curvine_release.raised_pipe_max_size():
            extra = [arg for setting in args.settings for arg in ("--set", setting)]
            installed = curvine_release.install(kube, "curvine", progress, *extra, spread=spread)
            classes = {"hostPath": "", "curvine": installed.storage_class}
            releases: dict[str, list[str]] = {}
            for backend in BACKENDS:
                prepared = umbrella_cpu.prepare(kube, f"xp-{backend.lower()}", values, classes[backend])
                progress(f"{backend}: helm install (two engines)")
                seconds = umbrella_cpu.rollout(kube, prepared, "install", RELEASE)
                results[backend] = {"install_to_ready_s": seconds}
                releases[backend] = _engines(kube, prepared.namespace)
            for backend, trials in _measure(kube, releases, args, progress).items():
                results[backend]["trials"] = trials
    finally:
        realnode.down(name, progress=progress)
    return {
        "nodes": args.nodes,
        "trials": args.trials,
        "tokens": [args.min_tokens, args.max_tokens],
        "curvine_set": args.settings,
        "connector": args.backend,
        "interleaved": True,
        "backends": results,
    }


def summarize(payload: dict[str, Any]) -> bool:
    """Adds the per-backend summaries and the ratios to the payload; whether the goal is met."""
    stats = {b: crosspod_summary.backend(payload["backends"][b]["trials"]) for b in BACKENDS}
    curvine, stand_in = stats["curvine"], stats["hostPath"]
    ratios = {
        "hit": crosspod_summary.ratio(curvine, stand_in, "hit"),
        "cold": crosspod_summary.ratio(curvine, stand_in, "cold"),
        "hit_paired": crosspod_summary.paired_ratio(
            payload["backends"]["curvine"]["trials"], payload["backends"]["hostPath"]["trials"]
        ),
    }
    payload["stats"], payload["ratios"] = stats, ratios
    payload["goal"] = GOALS[payload.get("nodes", 1)]
    payload["ok"] = ratios["hit"] is not None and ratios["hit"] <= payload["goal"]
    return bool(payload["ok"])


def _ms(spread: dict[str, float] | None, key: str) -> str:
    return f"{spread[key] * 1000:.0f} ms" if spread else "-"


def show(payload: dict[str, Any], console: Console) -> None:
    low, high = payload["tokens"]
    settings = ", ".join(payload["curvine_set"]) or "the chart's defaults"
    nodes = payload.get("nodes", 1)
    where = "A and B on one node" if nodes == 1 else f"A on node 1, B on node 2 of {nodes}"
    title = (
        f"cross-pod TTFT on replica B ({where}): {payload['trials']} trials per backend, prompts of "
        f"{low}-{high} tokens, backends alternating trial by trial; "
        f"KV connector: {payload.get('connector', 'lmcache')}; Curvine: {settings}"
    )
    table = Table(title=title)
    columns = ("backend", "valid", "hit tokens", "hit median", "hit p95", "cold median", "cold p95", "load")
    for column in (*columns, "cold / hit", "curvine / hostPath (hit median)"):
        table.add_column(column, justify="left" if column == "backend" else "right")
    for backend in BACKENDS:
        s = payload["stats"][backend]
        ratio = payload["ratios"]["hit"]
        table.add_row(
            backend,
            f"{s['trials'] - s['invalid']}/{s['trials']}",
            f"{s['hit_tokens_median']:.0f}",
            _ms(s["hit"], "median_s"),
            _ms(s["hit"], "p95_s"),
            _ms(s["cold"], "median_s"),
            _ms(s["cold"], "p95_s"),
            f"{s['load1_median']:.1f}" if s["load1_median"] is not None else "-",
            f"{s['speedup']:.2f}x" if s["speedup"] else "-",
            f"{ratio:.2f}x" if backend == "curvine" and ratio is not None else "",
        )
    console.print(table)
    for backend in BACKENDS:
        if payload["stats"][backend]["invalid"]:
            console.print(
                f"[yellow]{backend}: {payload['stats'][backend]['invalid']} trial(s) where B loaded no token "
                "through L2 (left out of the hit figures)"
            )
    cold, paired = payload["ratios"]["cold"], payload["ratios"].get("hit_paired")
    console.print(f"cold TTFT curvine / hostPath (median): {f'{cold:.2f}x' if cold else '-'}")
    console.print(
        "hit TTFT curvine / hostPath, median of the per-trial ratios (each pair ran back to back): "
        f"{f'{paired:.2f}x' if paired else '-'}"
    )
    console.print(
        f"the reference deployment read L2 across nodes at {REFERENCE.l2_read_gib_s} GiB/s (kvtier plan "
        f"prints it beside Curvine's measured speed); p95 of {payload['trials']} trials is their largest "
        "value; load: the machine's one-minute load average as the trials started (median)"
    )
    hit = payload["ratios"]["hit"]
    measured = f"{hit:.2f}x" if hit else "no valid trial"
    console.print(f"goal: cross-pod hit TTFT within {payload['goal']}x of the stand-in: {measured}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--nodes", type=int, choices=sorted(GOALS), default=1,
        help="nodes of the cluster: 2 puts engine B on the other node than A (a cross-node hit)",
    )  # fmt: skip
    parser.add_argument("--trials", type=int, default=8, help="trials per backend (after one warm-up)")
    parser.add_argument("--min-tokens", type=int, default=1000, help="shortest prompt in tokens")
    parser.add_argument("--max-tokens", type=int, default=1900, help="longest prompt in tokens")
    parser.add_argument(
        "--backend", choices=(tiers.LMCACHE, tiers.NATIVE), default=tiers.LMCACHE,
        help="the engines' KV connector (cache.backend): LMCache's buffered chunk reads, or vLLM's "
        "native offloading, whose fs tier reads with O_DIRECT",
    )  # fmt: skip
    parser.add_argument(
        "--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
        help="a value for the Curvine chart, as helm --set (repeatable), e.g. worker.hostNetwork=false",
    )  # fmt: skip
    cliopts.add_output(parser, json_alias=False)
    parser.add_argument(
        "--out", type=Path, default=Path("bench-results"), help="folder for crosspod-ttft.json"
    )
    args = parser.parse_args()
    console = Console(width=160)
    if not 0 < args.min_tokens <= args.max_tokens <= experiment.RIG_MAX_PROMPT:
        console.print(
            f"[red]crosspod ttft bench: --min-tokens {args.min_tokens} / --max-tokens {args.max_tokens}: "
            f"expected 0 < min <= max <= {experiment.RIG_MAX_PROMPT} (the rig's context, less room to answer)"
        )
        return 2
    reasons = realnode.preconditions() + [r for r in [curvine_binaries.missing()] if r]
    if reasons:
        console.print(f"[red]crosspod ttft bench: cannot run here: {'; '.join(reasons)}")
        return 2
    try:
        payload = run(args, console)
    except (UserError, RigError, AssertionError) as error:
        console.print(f"[red]crosspod ttft bench: {error}")
        return 2
    ok = summarize(payload)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "crosspod-ttft.json").write_text(json.dumps(payload, indent=2) + "\n")
    if args.output == "json":
        print(json.dumps(payload, indent=2))
    else:
        show(payload, console)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
