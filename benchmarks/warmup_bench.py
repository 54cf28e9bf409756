#!/usr/bin/env python3
"""L2 warm-up on the tiered rig: a scaled-out replica's first request for warmed vs unwarmed prefixes.

Two vLLM CPU replicas of values/cpu.yaml's rendered container (kvtier.engine_rig.tiers) on one shared L2;
the real warm-up (podscripts/l2_warm.py, as the chart's hook Job runs it) sends `--prefixes` system-prompt
prefixes through replica 0 and proves replica 1 loads them. Then a third replica starts, as an autoscaler
adds it, and gets, alternately, a request that starts with a warmed prefix and one that starts with a
prefix nobody sent (each followed by a question of its own): the first request for each prefix on the new
replica, side by side, one run, medians. The new replica's one-off set-up is paid by an unrelated short
request first, and reported on its own.

    .venv/bin/python benchmarks/warmup_bench.py [--prefixes 4] [--words 1500]

Needs the engine venv (toolchain/engine.sh). Exit 0 when every warmed prefix was verified, the new
replica's warmed requests loaded every whole chunk of their prefix and were faster than the unwarmed ones;
1 when not, 2 when the rig cannot start.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kvtier.engine_rig import tiers
from kvtier.engine_rig.errors import RigError
from kvtier.podscripts import kvcheck, l2_warm


def measure(rig: tiers.TieredRig, count: int, words: int) -> dict[str, object]:
    assert rig.l2_dir is not None
    warmed = [kvcheck.long_prompt(words) for _ in range(count)]
    unwarmed = [kvcheck.long_prompt(words) for _ in range(count)]
    prefixes = [l2_warm.Prefix(f"system-{i}", text=text) for i, text in enumerate(warmed)]
    settings = l2_warm.Settings(tiers.MODEL_NAME, rig.chunk_size, str(rig.l2_dir), True, 120.0, 300.0)
    start = time.perf_counter()
    outcomes, _ = l2_warm.warm(prefixes, [p.url for p in rig.started], settings)
    warm_s = time.perf_counter() - start
    new = rig.add_replica()
    setup = kvcheck.stream_completion(new.url, tiers.MODEL_NAME, "Hello there.", max_tokens=2, timeout=300)
    index = len(rig.started) - 1
    hits: list[tiers.Step] = []
    colds: list[tiers.Step] = []
    for i in range(count):  # alternate which kind goes first, so neither always follows the other
        pair = [(warmed[i], hits, "warmed"), (unwarmed[i], colds, "unwarmed")]
        for prefix, into, name in pair if i % 2 == 0 else reversed(pair):
            question = f"{prefix} Question {i}: {kvcheck.long_prompt(40)}"
            into.append(tiers.ask(rig, index, question, f"{name} prefix on the new replica"))
    return {
        "prefix_tokens": [o.tokens for o in outcomes],
        "whole_chunk_tokens": [o.chunks * rig.chunk_size for o in outcomes],
        "verified": all(o.verified for o in outcomes),
        "warm_s": warm_s,
        "setup_ms": setup["ttft_s"] * 1000,
        "warmed_ms": statistics.median(s.ttft_ms for s in hits),
        "unwarmed_ms": statistics.median(s.ttft_ms for s in colds),
        "warmed_hits": [s.hit_tokens for s in hits],
        "unwarmed_hits": [s.hit_tokens for s in colds],
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prefixes", type=int, default=4, help="prefixes of each kind")
    parser.add_argument("--words", type=int, default=1500, help="words per prefix (about one token each)")
    options = parser.parse_args()
    try:
        with (
            tempfile.TemporaryDirectory(prefix="kvtier-warmup-") as work,
            tiers.TieredRig(Path(work), replicas=2) as rig,
        ):
            result = measure(rig, options.prefixes, options.words)
    except RigError as error:
        print(f"warmup_bench: the rig could not run: {error}", file=sys.stderr)
        return 2
    warmed, unwarmed = result["warmed_ms"], result["unwarmed_ms"]
    assert isinstance(warmed, float) and isinstance(unwarmed, float)
    print(f"{options.prefixes} prefixes of each kind, {result['prefix_tokens']} tokens (warmed ones):")
    print(
        f"  warm-up of the {options.prefixes} prefixes (write + proof on replica 1): {result['warm_s']:.1f} s"
    )
    print(f"  new replica's set-up request (short, unrelated): {result['setup_ms']:.0f} ms")
    print(f"  new replica, first request of a warmed prefix (median TTFT): {warmed:.0f} ms")
    print(f"  new replica, first request of an unwarmed prefix (median TTFT): {unwarmed:.0f} ms")
    print(f"  warmed / unwarmed = {warmed / unwarmed:.2f}x")
    print(f"  connector hit tokens: warmed {result['warmed_hits']}, unwarmed {result['unwarmed_hits']}")
    loaded = all(
        hit >= whole for hit, whole in zip(result["warmed_hits"], result["whole_chunk_tokens"], strict=True)
    )
    return 0 if result["verified"] and loaded and warmed < unwarmed else 1


if __name__ == "__main__":
    sys.exit(main())
