#!/usr/bin/env python3
"""Routing benchmark on the real-engine rig: cache-aware vs round-robin, side by side, in one run.

Two vLLM CPU replicas of the tiny generated model and the real vllm-router (started with the flags
the umbrella chart renders for each strategy). Each strategy gets fresh prompts, each sent twice
through the router; the table says how many repeats reached the replica that served the prompt
first (the warm one) and the median TTFT of repeats over first sends.

    .venv/bin/python benchmarks/routing_bench.py [--trials 20] [--tokens 2000] [--out DIR]

Needs the engine venv (toolchain/engine.sh). Targets: cache-aware >= 95 % warm, TTFT ratio <= 0.15.
Exit 0 when the cache-aware targets are met, 1 when not, 2 when the rig cannot start.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kvtier.bench import methodology, prompts, routing
from kvtier.engine_rig import rig as engine_rig
from kvtier.errors import UserError
from kvtier.podscripts import kvcheck

STRATEGIES = ("prefixaware", "roundrobin")
TARGET_WARM, TARGET_TTFT = 0.95, 0.15


def run(trials: int, tokens: int, strategies: list[str], console: Console) -> dict:
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="kvtier-rig-") as work,
        engine_rig.EngineRig(Path(work), log=lambda line: console.print(f"[dim]{line}")) as rig,
    ):
        replicas = methodology.replicas_for(rig.urls)
        count = prompts.tokenize_counter(rig.urls[0], engine_rig.MODEL_NAME)
        results = []
        for strategy in strategies:
            with rig.router(strategy) as url:
                result = routing.routing_trials(
                    url, strategy, replicas, engine_rig.MODEL_NAME, trials, tokens, count, lambda _s: None
                )
            flags, source = rig.last_router_flags
            results.append({**result.as_dict(), "router_flags": flags, "router_flags_from": source})
    return {
        "trials": trials,
        "tokens": tokens,
        "note": engine_rig.CPU_TIERS_NOTE,
        "seconds": time.monotonic() - started,
        "strategies": results,
    }


def show(payload: dict, console: Console) -> bool:
    title = f"routing on the rig: {payload['trials']} repeated prompts of ~{payload['tokens']} tokens"
    table = Table(title=title)
    for column in ("strategy", "router flags", "repeats to warm", "TTFT cold", "TTFT repeat", "repeat/cold"):
        table.add_column(column, justify="left" if column.startswith(("strategy", "router")) else "right")
    for r in payload["strategies"]:
        table.add_row(
            r["strategy"],
            " ".join(r["router_flags"]),
            f"{r['warm_ratio'] * 100:.0f} %",
            f"{r['ttft_cold_median_s'] * 1000:.0f} ms",
            f"{r['ttft_repeat_median_s'] * 1000:.0f} ms",
            f"{r['ttft_ratio']:.3f}",
        )
    console.print(table)
    console.print(payload["note"])
    aware = payload["strategies"][0]
    ok = aware["warm_ratio"] >= TARGET_WARM and aware["ttft_ratio"] <= TARGET_TTFT
    verdict = "MET" if ok else "NOT MET"
    console.print(
        f"cache-aware targets (>= {TARGET_WARM:.0%} warm, TTFT ratio <= {TARGET_TTFT}): {verdict}; "
        f"router flags from: {aware['router_flags_from']}; {payload['seconds']:.0f} s in all"
    )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="prompts per strategy (each sent twice)")
    parser.add_argument("--tokens", type=int, default=2000, help="prompt length in tokens")
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="folder for routing.json")
    parser.add_argument(
        "--strategies", default=",".join(STRATEGIES), help="comma-separated, the first is held to the targets"
    )
    args = parser.parse_args()
    console = Console(width=120)
    try:
        payload = run(args.trials, args.tokens, args.strategies.split(","), console)
    except (UserError, kvcheck.CheckError) as error:
        console.print(f"[red]routing bench: {error}")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "routing.json").write_text(json.dumps(payload, indent=2) + "\n")
    return 0 if show(payload, console) else 1


if __name__ == "__main__":
    sys.exit(main())
