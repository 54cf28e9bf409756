#!/usr/bin/env python3
"""The real-node tier, measured: values/cpu.yaml's whole umbrella on a real kubelet + containerd.

One run, one cluster of its own (kvtier.cluster.realnode, in its own network namespace):
`helm install --wait` to every pod Ready, `helm test` duration, then the routing trials
(kvtier.bench.routing) through the in-cluster router's Service, with prefixaware and then roundrobin
(a `helm upgrade` of routing.strategy between them, same engines' image and model), side by side.

    .venv/bin/python benchmarks/realnode_bench.py [--trials 10] [--tokens 1000] [--out DIR]
    .venv/bin/python benchmarks/realnode_bench.py --load [--qps 2,4] [--requests 60] [--out DIR]

`--load` runs the load benchmark's mix instead of the routing trials (`kvtier load` inside the cluster's
network namespace, through the router Service, so kube-proxy spreads the requests over the chart's two
router pods) for each configuration of LOAD_CONFIGS, a `helm upgrade` between them, with three engine
replicas and L0 capped as on the rig (kvtier.load.experiment).

Needs root, the node programs (make node-tools) and the engine venv (make engine). The engine image
(several GB) is built once per venv and imported into the new cluster, about 4 minutes of the run.
Exit 0 when prefixaware sends more repeats to the warm replica than roundrobin, 1 when not, 2 when
the cluster or the install cannot start.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kvtier import cliopts, helm
from kvtier.cluster.realnode import images, umbrella_cpu
from kvtier.cluster.realnode import lifecycle as realnode
from kvtier.cluster.realnode.client import Kube
from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig import tiers
from kvtier.engine_rig.errors import RigError
from kvtier.errors import UserError
from kvtier.load import experiment, report, summary

RELEASE = "kv"
STRATEGIES = ("prefixaware", "roundrobin")
# (tiers, routing.strategy) per load point set: the chosen routing with every tier, prefix affinity, and
# the L0-only round-robin baseline, as benchmarks/load_bench.py compares them on the rig.
LOAD_CONFIGS = (("l0+l1+l2", "prefixaware"), ("l0+l1+l2", "roundrobin"), ("l0", "roundrobin"))
ROUTER_PORT, ENGINE_PORT = 8080, 8000
SLO_MS = 1000.0  # p95 TTFT, as benchmarks/load_bench.py's default


def _install(kube: Kube, prepared: umbrella_cpu.Prepared, verb: str, strategy: str, *extra: str) -> float:
    """helm install/upgrade --wait with that strategy, until every pod is Ready; seconds taken."""
    return umbrella_cpu.rollout(
        kube, prepared, verb, RELEASE, "--set", f"routing.strategy={strategy}", *extra
    )


def _trials(kube: Kube, ns: str, strategy: str, trials: int, tokens: int) -> dict:
    """The routing probe inside the cluster's network namespace: the router's Service by its ClusterIP,
    each engine pod by its IP."""
    router = f"{umbrella_cpu.engine_deployment(RELEASE)}-router"
    ip = kube.kubectl("get", "service", router, "-n", ns, "-o", "jsonpath={.spec.clusterIP}").strip()
    engines = [p["status"]["podIP"] for p in umbrella_cpu.pods(kube, ns, RELEASE, "engine")]
    argv = [sys.executable, "-m", "kvtier.bench.routing_probe", "--router", f"http://{ip}:{ROUTER_PORT}"]
    for engine in engines:
        argv += ["--replica", f"http://{engine}:{ENGINE_PORT}"]
    argv += ["--strategy", strategy, "--model", engine_rig.MODEL_NAME, "--trials", str(trials)]
    argv += ["--tokens", str(tokens)]
    out = kube.run(argv, timeout=1800)  # stdout only; a failed probe raises with its output
    result = json.loads(out.strip().splitlines()[-1])
    if "error" in result:
        raise UserError(f"routing probe ({strategy}): {result['error']}")
    return result


def _tier_sets(tier_set: str) -> list[str]:
    """`--set` flags that turn the chart's tiers to `tier_set` (values/cpu.yaml has all three on)."""
    flags = []
    for tier, setting in tiers.TIER_SETS[tier_set].items():
        flags += ["--set", f"cache.{tier}.enabled={str(setting['enabled']).lower()}"]
    return flags


def _load(
    kube: Kube,
    prepared: umbrella_cpu.Prepared,
    qps: list[float],
    requests: int,
    out: Path,
    upgrades: list[float],
) -> list[dict]:
    """`kvtier load` inside the cluster's network namespace for each LOAD_CONFIGS entry."""
    ns, rows = prepared.namespace, []
    router = f"{umbrella_cpu.engine_deployment(RELEASE)}-router"
    for index, (tier_set, strategy) in enumerate(LOAD_CONFIGS):
        if index:
            upgrades.append(_install(kube, prepared, "upgrade", strategy, *_tier_sets(tier_set)))
        ip = kube.kubectl("get", "service", router, "-n", ns, "-o", "jsonpath={.spec.clusterIP}").strip()
        argv = [sys.executable, "-m", "kvtier.cli", "load", "--router-url", f"http://{ip}:{ROUTER_PORT}"]
        for engine in umbrella_cpu.pods(kube, ns, RELEASE, "engine"):
            argv += ["--replica-url", f"http://{engine['status']['podIP']}:{ENGINE_PORT}"]
        folder = out / f"realnode-{tier_set}-{strategy}".replace("+", "-")
        argv += [
            "--model",
            engine_rig.MODEL_NAME,
            "--tokenizer",
            str(prepared.volumes / "models" / engine_rig.MODEL_NAME),
        ]
        argv += ["--qps", ",".join(f"{q:g}" for q in qps), "--requests", str(requests)]
        argv += ["--max-prompt-tokens", str(experiment.RIG_MAX_PROMPT), "--out", str(folder), "-o", "json"]
        payload = json.loads(kube.run(argv, timeout=3600))
        rows += [row | {"tiers": tier_set, "routing": strategy} for row in payload["rows"]]
    return rows


def run(trials: int, tokens: int, console: Console, load: argparse.Namespace | None = None) -> dict:
    """The routing trials, or with `load` (--load, --qps, --requests, --out) the load points instead."""

    def progress(message: str) -> None:
        console.print(f"[dim]{message}")

    name = f"bench-{os.getpid()}"
    cluster = realnode.up(name, progress=progress)
    try:
        kube = Kube(cluster)
        image = images.engine(progress, engine_rig.engine_python().parent.parent.resolve())
        images.import_into(realnode.layout(name).containerd_socket, [image], progress)
        values = umbrella_cpu.overlay(cluster, image.ref)
        if load:  # three replicas, L0 capped: the rig's load configuration
            (model,) = values["models"]
            model["replicas"] = experiment.RIG_REPLICAS
            model["extraArgs"] += ["--num-gpu-blocks-override", str(experiment.RIG_L0_BLOCKS)]
        prepared = umbrella_cpu.prepare(kube, "bench", values)
        helm.build_dependencies(umbrella_cpu.UMBRELLA)
        first = LOAD_CONFIGS[0] if load else (tiers.ALL_TIERS, STRATEGIES[0])
        install_s = _install(kube, prepared, "install", first[1], *_tier_sets(first[0]))
        started = time.monotonic()
        kube.helm("helm3", "test", RELEASE, "-n", prepared.namespace, "--timeout", "10m", timeout=700)
        test_s = time.monotonic() - started
        results, upgrades, rows = [], [], []
        if load:
            rows = _load(kube, prepared, load.qps, load.requests, load.out, upgrades)
        for index, strategy in enumerate(() if load else STRATEGIES):
            if index:
                upgrades.append(_install(kube, prepared, "upgrade", strategy))
            progress(f"routing trials with {strategy}")
            results.append(_trials(kube, prepared.namespace, strategy, trials, tokens))
        kube.helm("helm3", "uninstall", RELEASE, "-n", prepared.namespace, "--wait", check=False)
        umbrella_cpu.remove(kube, prepared)
    finally:
        realnode.down(name, progress=progress)
    return {
        "trials": trials,
        "tokens": tokens,
        "install_to_ready_s": install_s,
        "helm_test_s": test_s,
        "upgrade_to_ready_s": upgrades,
        "strategies": results,
        "load_rows": rows,
    }


def show(payload: dict, console: Console) -> bool:
    console.print(
        f"helm install --wait to every pod Ready: {payload['install_to_ready_s']:.0f} s; "
        f"helm test: {payload['helm_test_s']:.0f} s; "
        f"upgrade to the next strategy: {', '.join(f'{s:.0f} s' for s in payload['upgrade_to_ready_s'])}"
    )
    title = f"in-cluster router: {payload['trials']} prompts of ~{payload['tokens']} tokens, each sent twice"
    table = Table(title=title)
    for column in ("strategy", "repeats to warm", "TTFT cold", "TTFT repeat", "repeat/cold"):
        table.add_column(column, justify="left" if column == "strategy" else "right")
    for r in payload["strategies"]:
        table.add_row(
            r["strategy"],
            f"{r['warm_ratio'] * 100:.0f} %",
            f"{r['ttft_cold_median_s'] * 1000:.0f} ms",
            f"{r['ttft_repeat_median_s'] * 1000:.0f} ms",
            f"{r['ttft_ratio']:.3f}",
        )
    console.print(table)
    aware, blind = payload["strategies"]
    console.print(
        f"prefixaware / roundrobin, measured in this run: repeats to warm "
        f"{aware['warm_ratio'] * 100:.0f} % vs {blind['warm_ratio'] * 100:.0f} %, repeat TTFT ratio "
        f"{aware['ttft_repeat_median_s'] / blind['ttft_repeat_median_s']:.2f}"
    )
    return aware["warm_ratio"] > blind["warm_ratio"]


def show_load(payload: dict, console: Console) -> bool:
    """The load rows and the two comparisons the real node can make (its matrix has no candidates)."""
    console.print(report.table(payload["load_rows"], "load through the in-cluster router (real node)"))
    found = report.verdicts(payload["load_comparisons"])
    for said, _ in found:
        console.print(f"  {said}")
    return all(verdict is not False for _, verdict in found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", action="store_true", help="the load benchmark's mix instead of the trials")
    parser.add_argument("--qps", type=cliopts.rates, default=[2.0, 4.0], help="--load: offered rates")
    parser.add_argument("--requests", type=int, default=60, help="--load: requests per point")
    parser.add_argument("--trials", type=int, default=10, help="prompts per strategy (each sent twice)")
    parser.add_argument("--tokens", type=int, default=1000, help="prompt length in tokens")
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="folder for realnode.json")
    args = parser.parse_args()
    console = Console(width=160)
    reasons = realnode.preconditions()
    if reasons:
        console.print(f"[red]realnode bench: this machine cannot run a real node: {'; '.join(reasons)}")
        return 2
    try:
        payload = run(args.trials, args.tokens, console, args if args.load else None)
    except (UserError, RigError, AssertionError) as error:
        console.print(f"[red]realnode bench: {error}")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    if args.load:
        payload["load_comparisons"] = summary.comparisons(
            payload["load_rows"], tiers.ALL_TIERS, summary.AFFINITY, SLO_MS
        )
    (args.out / "realnode.json").write_text(json.dumps(payload, indent=2) + "\n")  # before anything prints
    ok = show_load(payload, console) if args.load else show(payload, console)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
