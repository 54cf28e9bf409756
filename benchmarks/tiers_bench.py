#!/usr/bin/env python3
"""L1/L2 benchmark on the tiered rig: TTFT of cold, L0, cross-replica L2 and recompute, side by side, one run.

Two vLLM CPU replicas started from values/cpu.yaml's rendered container (kvtier.engine_rig.tiers) share
one L2 directory through LMCache (or, with --backend vllm-native, vLLM's own offloading); each round sends
fresh prompts and the table reports medians over the rounds, with hit tokens from vLLM's own connector
counter.

    .venv/bin/python benchmarks/tiers_bench.py [--rounds 5] [--words 2000] [--backend B] [--out DIR]

Needs the engine venv (toolchain/engine.sh). Target (issue 16): L2-hit TTFT <= 0.25x cold TTFT at ~2,000
tokens, whole chunks hit, identical greedy outputs. Exit 0 when met, 1 when not, 2 when the rig cannot start.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from rich.console import Console

from kvtier.bench import report
from kvtier.engine_rig import tiers
from kvtier.engine_rig.errors import RigError

TARGET_L2_VS_COLD = 0.25


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5, help="fresh prompts per step (medians reported)")
    parser.add_argument("--words", type=int, default=2000, help="words per prompt (about one token each)")
    parser.add_argument("--out", type=Path, help="write the full result as JSON here")
    parser.add_argument(
        "--backend", choices=("lmcache", tiers.NATIVE), default="lmcache", help="cache.backend"
    )
    options = parser.parse_args()
    try:
        with (
            tempfile.TemporaryDirectory(prefix="kvtier-tiers-") as work,
            tiers.TieredRig(Path(work), backend=options.backend) as rig,
        ):
            result = tiers.measure_tiers(rig, words=options.words, repeats=options.rounds)
    except RigError as error:
        print(f"tiers_bench: the rig could not run: {error}", file=sys.stderr)
        return 2
    Console().print(report.tiers_table(result))
    print(report.tiers_summary(result))
    if options.out:
        options.out.mkdir(parents=True, exist_ok=True)
        (options.out / "tiers.json").write_text(json.dumps(result, indent=2))
    whole = result["prompt_tokens"] // result["chunk_size"] * result["chunk_size"]
    met = (
        result["l2_vs_cold"] <= TARGET_L2_VS_COLD
        and result["table"][2]["hit_tokens"] == whole
        and result["identical_outputs"]
    )
    verdict = "MET" if met else "MISSED"
    print(f"target L2/cold <= {TARGET_L2_VS_COLD}x, {whole} hit tokens, identical outputs: {verdict}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
