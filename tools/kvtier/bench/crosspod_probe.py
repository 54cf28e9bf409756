"""Cross-pod TTFT trials as a process of their own, so a benchmark can run them where the engine pods'
addresses are (inside a real-node cluster's network namespace). Prints one JSON object: the trials, each
summed up by kvtier.bench.crosspod_summary.

    python -m kvtier.bench.crosspod_probe --a URL --b URL --model M [--trials 8] [--min-tokens 1000]
        [--max-tokens 1900] [--seed 55] [--warmup 1] [--number 0]

Per trial, two fresh prompts of the same length (drawn between the bounds from the seed and the trial's
number, so two backends get the same workload however their trials interleave): the first is sent to A (it
computes and stores the KV cache in the shared L2), then to B, whose connector hit tokens and TTFT are
recorded; the second goes to B alone, nobody having stored it (the cold baseline). Which of B's two
requests goes first alternates with the trial's number. `--warmup` trials run first and are left out (an
engine's first requests pay one-off costs). Each trial also records the machine's one-minute load average
as it starts, so a noisy stretch shows in the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from typing import Any

from kvtier.bench import prompts
from kvtier.podscripts import kvcheck

SETTLE_S = 1.0  # as kvcheck.check_crosspod, where A exports no write metric to wait on
WRITE_WAIT_S = 30.0
TIMEOUT_S = 120.0


def _on_b(b: str, model: str, prompt: str) -> tuple[float, float | None]:
    """One streamed request to B, bracketed by scrapes of its metrics: (TTFT, connector hit tokens)."""
    before = kvcheck.read_metrics(kvcheck.metrics_url(b), TIMEOUT_S)
    timing = kvcheck.stream_completion(b, model, prompt, timeout=TIMEOUT_S)
    deltas = kvcheck.tier_deltas(before, kvcheck.read_metrics(kvcheck.metrics_url(b), TIMEOUT_S))
    return timing["ttft_s"], deltas["external_hit_tokens"]


def trial(
    a: str, b: str, model: str, tokens: int, count: prompts.Tokenizer, cold_first: bool
) -> dict[str, Any]:
    shared, measured, _ = prompts.sized_prompt(tokens, count)
    fresh, _, _ = prompts.sized_prompt(tokens, count)
    a_metrics = kvcheck.metrics_url(a)
    before_a = kvcheck.read_metrics(a_metrics, TIMEOUT_S)
    a_ttft = kvcheck.stream_completion(a, model, shared, timeout=TIMEOUT_S)["ttft_s"]
    # B is timed once A's chunks are in L2, as the helm test's check asks it
    kvcheck.wait_for_l2_writes(a_metrics, before_a, WRITE_WAIT_S, SETTLE_S, TIMEOUT_S)
    if cold_first:
        cold_ttft, cold_hits = _on_b(b, model, fresh)
        hit_ttft, hits = _on_b(b, model, shared)
    else:
        hit_ttft, hits = _on_b(b, model, shared)
        cold_ttft, cold_hits = _on_b(b, model, fresh)
    return {
        "tokens": measured,
        "a_ttft_s": a_ttft,
        "hit_ttft_s": hit_ttft,
        "hit_tokens": hits,
        "cold_ttft_s": cold_ttft,
        "cold_hit_tokens": cold_hits,
        "cold_first": cold_first,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="the engine that computes and stores (URL)")
    parser.add_argument("--b", required=True, help="the engine that loads through L2 (URL)")
    parser.add_argument("--model", required=True)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--min-tokens", type=int, default=1000)
    parser.add_argument("--max-tokens", type=int, default=1900)
    parser.add_argument("--seed", type=int, default=55)
    parser.add_argument("--warmup", type=int, default=1, help="trials run first and left out")
    parser.add_argument("--number", type=int, default=0, help="the number of the first trial (warm-ups too)")
    args = parser.parse_args(argv)
    results: list[dict[str, Any]] = []
    try:
        count = prompts.tokenize_counter(args.a, args.model)
        for index in range(args.warmup + args.trials):
            number = args.number + index
            tokens = random.Random(args.seed * 100_003 + number).randint(args.min_tokens, args.max_tokens)
            load = os.getloadavg()[0]
            got = trial(args.a, args.b, args.model, tokens, count, cold_first=bool(number % 2))
            if index >= args.warmup:
                results.append({**got, "number": number, "load1": load})
    except kvcheck.CheckError as error:
        print(json.dumps({"error": str(error), "trials": results}))
        return 1
    print(json.dumps({"trials": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
