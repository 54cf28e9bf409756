#!/usr/bin/env python3
"""The soak on the CPU rig: the load mix under each fault, every answer held to its reference.

Each prompt's reference is its greedy answer from a replica with no cache (kvtier.load.soak_rig); then
three tiered replicas behind two round-robin routers serve the mix while one fault at a time is injected (a
killed engine or router, chunks changed, cut or removed while they are read, the eviction job at aggressive
watermarks, the L2 namespace gone, the L2 volume full or read-only). One row per fault: requests, failed
(answers cut short included, and how many were sent while a killed replica was down), wrong answers, chunks
the integrity check refused, chunks lost that policy did not evict, time to recover. `l2-full` and
`l2-read-only` mount a tmpfs for the L2 (root).

    .venv/bin/python benchmarks/soak_bench.py [--faults none,kill-engine,...] [--requests 40] [--qps 3]
        [--out DIR] [--backend lmcache|vllm-native] [--no-integrity]

About 8 minutes with the defaults on two cores (2026-12-04). Exit 1 when an answer was wrong, a chunk was
lost, a fault could not be injected or a request failed (an answer cut short included) that no killed
replica explains; 2 when the rig cannot start.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from pathlib import Path

from kvtier.engine_rig import tiers as tier_rig
from kvtier.engine_rig.errors import RigError
from kvtier.load import experiment, soak, soak_rig, workload


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--faults", default=",".join(soak.FAULTS), help="faults, comma-separated, in order")
    parser.add_argument("--requests", type=int, default=40, help="requests per fault")
    parser.add_argument("--qps", type=float, default=3.0, help="offered rate")
    parser.add_argument("--seed", type=int, default=0, help="the mix's seed")
    parser.add_argument("--out", type=Path, help="write soak.json here, and keep the rig's folder in it")
    parser.add_argument(
        "--no-integrity",
        action="store_true",
        help="cache.l2.integrity off: what changed chunks do without the check (wrong answers expected)",
    )
    parser.add_argument(
        "--backend",
        choices=(tier_rig.LMCACHE, tier_rig.NATIVE),
        default=tier_rig.LMCACHE,
        help="cache.backend of the tiered replicas (vllm-native: vLLM's own CPU and fs tiers)",
    )
    options = parser.parse_args()
    mix = workload.Mix(
        requests=options.requests, max_prompt_tokens=experiment.RIG_MAX_PROMPT, seed=options.seed
    )
    faults = [f for f in options.faults.split(",") if f]
    try:
        # With --out the rig's folder (engine logs, each client's results) stays there for a post-mortem.
        kept = options.out and contextlib.nullcontext(str(options.out / "work"))
        with kept or tempfile.TemporaryDirectory(prefix="kvtier-soak-") as work:
            rows = soak_rig.run(
                faults, mix, options.qps, Path(work), lambda line: print(line, file=sys.stderr),
                integrity=not options.no_integrity, backend=options.backend,
            )  # fmt: skip
    except RigError as error:
        print(f"soak_bench: the rig could not run: {error}", file=sys.stderr)
        return 2
    print(soak.table(rows))
    if options.out:
        options.out.mkdir(parents=True, exist_ok=True)
        (options.out / "soak.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if soak.clean(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
