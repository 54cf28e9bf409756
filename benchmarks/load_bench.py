#!/usr/bin/env python3
"""Load benchmark on the CPU rig: tier sets x routings x a QPS sweep, side by side in one run.

Three vLLM CPU replicas started from values/cpu.yaml's rendered container (L0 capped so the mix outgrows it),
the chart's two router replicas (vllm-router with the chart's flags, or a named candidate), and vLLM's own
load generator (`vllm bench serve`, one client per router replica) replaying the multi-tenant mix of
kvtier.load.workload open-loop. Prints one row per point and the ratios issue 37 asks for:

- all tiers with the chosen routing vs L0 only with round robin: throughput at the p95 TTFT SLO (goal
  >= 1.5x) and p95 TTFT at the baseline's knee (goal <= 0.5x);
- the chosen routing vs prefix affinity (the chart's prefixaware), both with all tiers: throughput at the
  SLO (goal >= 1.2x) and p95 TTFT at the lowest QPS (goal: no worse, <= 1.0x).

    .venv/bin/python benchmarks/load_bench.py [--qps 2,4,6] [--requests 60] [--out DIR]

Needs the engine venv (make engine). Writes load.json and load.png to --out. Exit 0 when every goal is met,
1 when one is not (the table says which), 2 when the rig cannot start.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from kvtier import cliopts
from kvtier.engine_rig import tiers
from kvtier.errors import UserError
from kvtier.load import experiment, plot, report, routing, summary, workload
from kvtier.podscripts import kvcheck


def show(payload: dict[str, Any], console: Console) -> bool:
    mix, slo = payload["mix"], payload["slo_ttft_ms"]
    console.print(report.table(payload["rows"], f"load on the rig: {mix['requests']} requests per point, "
                               f"SLO p95 TTFT <= {slo:.0f} ms"))  # fmt: skip
    result = payload["comparisons"]
    console.print(
        f"chosen routing {result['chosen']}; L0-only round robin's knee: {result['baseline_knee_qps']} QPS"
    )
    found = report.verdicts(result)
    for said, _ in found:
        console.print(f"  {said}")
    for pair in payload["agreement"]:
        console.print(
            f"  router replicas {pair['tiers']} {pair['routing']} at {pair['qps']:g} QPS: cache hits "
            f"{report.pct(pair['hit_share'])} with {pair['router_replicas']}, "
            f"{report.pct(pair['hit_share_one_router'])} with one; "
            f"p95 TTFT {report.ms(pair['p95_ms'])} vs {report.ms(pair['p95_ms_one_router'])}"
        )
    console.print(f"{payload['seconds']:.0f} s in all; {experiment.RIG_NOTE}")
    return all(verdict is True for _, verdict in found)


def _counts(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected counts like 1,2") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected counts of at least 1 like 1,2")
    return values


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    compared = [name for name in tiers.TIER_SETS if name != tiers.NO_CACHE]
    parser.add_argument("--tiers", default=",".join(compared), help="tier sets, comma-separated")
    parser.add_argument(
        "--routings",
        default=",".join(routing.COMPARED),
        help=f"comma-separated, of {', '.join(routing.ROUTINGS)}",
    )
    parser.add_argument("--chosen", default="prefixaware", help="the routing held to the goals")
    parser.add_argument("--qps", type=cliopts.rates, default=[2.0, 4.0, 6.0], help="offered load points")
    parser.add_argument(
        "--router-replicas", type=_counts, default=[2], help="router replicas, e.g. 1,2 (agreement's cost)"
    )
    parser.add_argument("--requests", type=int, default=60, help="requests per point")
    parser.add_argument("--slo-ms", type=float, default=1000.0, help="p95 TTFT SLO in ms")
    parser.add_argument("--seed", type=int, default=0, help="the mix's seed")
    parser.add_argument("--show", type=Path, help="print an earlier run's load.json again (runs nothing)")
    parser.add_argument(
        "--out", type=Path, default=Path("bench-results"), help="folder for load.json, load.png"
    )
    args = parser.parse_args()
    console = Console(width=160)
    if args.show:
        return 0 if show(json.loads(args.show.read_text()), console) else 1
    configurations = list(itertools.product(args.tiers.split(","), args.routings.split(",")))
    if summary.BASELINE not in configurations:  # the comparisons' baseline is always measured
        configurations.insert(0, summary.BASELINE)
    matrix = experiment.Matrix(
        configurations=configurations,
        qps=args.qps,
        mix=workload.Mix(requests=args.requests, seed=args.seed, max_prompt_tokens=experiment.RIG_MAX_PROMPT),
        slo_ttft_ms=args.slo_ms,
        router_replicas=args.router_replicas,
    )
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="kvtier-load-") as work:
            rows = experiment.run(matrix, Path(work), lambda line: console.print(f"[dim]{line}"))
    except (UserError, kvcheck.CheckError) as error:
        console.print(f"[red]load bench: {error}")
        return 2
    payload = {
        "mix": workload.describe(matrix.mix),
        "replicas": matrix.replicas,
        "router_replicas": list(matrix.router_replicas),
        "l0_blocks": matrix.l0_blocks,
        "slo_ttft_ms": args.slo_ms,
        "note": experiment.RIG_NOTE,
        "rows": rows,
        "comparisons": summary.comparisons(rows, tiers.ALL_TIERS, args.chosen, args.slo_ms),
        "agreement": summary.agreement(rows),
        "seconds": time.monotonic() - started,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "load.json").write_text(json.dumps(payload, indent=2) + "\n")
    plot.curves(rows, args.slo_ms, args.out / "load.png")
    return 0 if show(payload, console) else 1


if __name__ == "__main__":
    sys.exit(main())
