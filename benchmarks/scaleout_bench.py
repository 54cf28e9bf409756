#!/usr/bin/env python3
"""Scale-out on the tiered rig: TTFT of a replica added after the others served the traffic.

One vLLM CPU replica (values/cpu.yaml's rendered container, kvtier.engine_rig.tiers) serves `--rounds`
fresh prompts, which LMCache writes to the shared L2. Then a second replica starts, as an autoscaler would
add it, and gets, alternately, one of those prompts (its L2 holds them: an L2 hit on an empty L0/L1) and a
prompt nobody served (cold on the new replica). Side by side, one run, medians; the new replica's very first
request is reported on its own (it also pays the engine's one-off set-up).

    .venv/bin/python benchmarks/scaleout_bench.py [--rounds 4] [--words 2000]

Needs the engine venv (toolchain/engine.sh). Exit 0 when the new replica's L2 hits load every whole chunk
and are faster than its cold prompts, 1 when not, 2 when the rig cannot start.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from kvtier.engine_rig import tiers
from kvtier.engine_rig.errors import RigError
from kvtier.podscripts import kvcheck


def measure(rig: tiers.TieredRig, rounds: int, words: int) -> dict[str, object]:
    warm = kvcheck.long_prompt(600)
    kvcheck.stream_completion(rig.started[0].url, tiers.MODEL_NAME, warm, timeout=300)
    served = [kvcheck.long_prompt(words) for _ in range(rounds)]
    unseen = [kvcheck.long_prompt(words) for _ in range(rounds)]
    reference = []
    for prompt in served:
        before = len(rig.chunk_files())
        reference.append(tiers.ask(rig, 0, prompt, "cold on replica 0"))
        rig.wait_for_chunks(before + tiers.prompt_tokens(rig.started[0].url, prompt) // rig.chunk_size)
    rig.add_replica()
    hits, colds = [], []
    for index in range(rounds):  # alternate which kind goes first, so neither always follows the other
        pair = [(served[index], hits, "L2 hit"), (unseen[index], colds, "cold")]
        for prompt, into, name in pair if index % 2 == 0 else reversed(pair):
            into.append(tiers.ask(rig, 1, prompt, f"{name} on the new replica"))
    first = hits[0]  # round 0 sends the served prompt first: the new replica's first request ever
    tokens = tiers.prompt_tokens(rig.started[0].url, served[0])
    return {
        "prompt_tokens": tokens,
        "whole_chunk_tokens": tokens // rig.chunk_size * rig.chunk_size,
        "first_request_ms": first.ttft_ms,
        "new_l2_hit_ms": statistics.median(s.ttft_ms for s in hits[1:] or hits),
        "new_cold_ms": statistics.median(s.ttft_ms for s in colds),
        "replica0_cold_ms": statistics.median(s.ttft_ms for s in reference),
        "hit_tokens": [s.hit_tokens for s in hits],
        "same_output": all(h.text == r.text for h, r in zip(hits, reference, strict=True)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=4, help="prompts of each kind on the new replica")
    parser.add_argument("--words", type=int, default=2000, help="words per prompt (about one token each)")
    options = parser.parse_args()
    try:
        with (
            tempfile.TemporaryDirectory(prefix="kvtier-scaleout-") as work,
            tiers.TieredRig(Path(work), replicas=1) as rig,
        ):
            result = measure(rig, options.rounds, options.words)
    except RigError as error:
        print(f"scaleout_bench: the rig could not run: {error}", file=sys.stderr)
        return 2
    hit, cold = result["new_l2_hit_ms"], result["new_cold_ms"]
    print(f"{result['prompt_tokens']}-token prompts, {options.rounds} of each kind, medians:")
    print(f"  replica 0, cold (the prompts the new replica later hits): {result['replica0_cold_ms']:.0f} ms")
    first = result["first_request_ms"]
    print(f"  new replica, its very first request (an L2 hit, with one-off set-up): {first:.0f} ms")
    print(f"  new replica, L2 hits (prompts others served; the first one left out): {hit:.0f} ms")
    print(f"  new replica, cold (prompts nobody served): {cold:.0f} ms")
    print(f"  new replica L2 hit / its cold = {hit / cold:.2f}x; hit tokens {result['hit_tokens']}")
    print(f"  greedy outputs equal to replica 0's: {result['same_output']}")
    ok = all(t == result["whole_chunk_tokens"] for t in result["hit_tokens"]) and hit < cold
    return 0 if ok and result["same_output"] else 1


if __name__ == "__main__":
    sys.exit(main())
