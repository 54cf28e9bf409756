"""The reference methodology: TTFT by prompt length (cold, warm on the same replica, warm on another),
a multi-turn conversation, and optional concurrency. Every request is streamed (TTFT seen by the
client) and bracketed by metric scrapes of every replica, so each hit is attributed to a replica and
a tier (L0 = vLLM prefix cache, L1/L2 = tokens LMCache supplied, L2 reads)."""

from __future__ import annotations

import concurrent.futures
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kvtier.bench import prompts
from kvtier.podscripts import kvcheck

Step = Callable[[str], None]
DEFAULT_LENGTHS = (500, 1000, 2000, 2500, 3000)
CASES = ("cold", "warm-same", "warm-other")
DEFAULT_TIMEOUT = 120.0  # seconds per request (a cold 3k-token prefill on a busy CPU takes a few)


@dataclass(frozen=True)
class Replica:
    name: str
    url: str
    metrics_url: str


@dataclass
class Sample:
    case: str
    target: int  # the length asked for (tokens); `tokens` is what the prompt measured
    tokens: int
    repeat: int
    ttft_s: float
    total_s: float
    served_by: str | None
    tiers: dict[str, float | None] = field(default_factory=dict)


def replicas_for(urls: Sequence[str]) -> list[Replica]:
    """Replicas named replica-0, replica-1, ... with their /metrics on the same port (vLLM's)."""
    return [Replica(f"replica-{i}", url, kvcheck.metrics_url(url)) for i, url in enumerate(urls)]


def scrape(replicas: Sequence[Replica], timeout: float) -> dict[str, dict[str, float]]:
    return {r.name: kvcheck.read_metrics(r.metrics_url, timeout) for r in replicas}


def served_by(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]) -> str | None:
    """The replica whose finished-request counter moved (None if none or several did)."""
    moved = [name for name in after if (kvcheck.tier_deltas(before[name], after[name])["requests"] or 0) > 0]
    return moved[0] if len(moved) == 1 else None


def measure(
    url: str,
    model: str,
    prompt: str,
    replicas: Sequence[Replica],
    max_tokens: int = 4,
    timeout: float = DEFAULT_TIMEOUT,
) -> tuple[dict[str, Any], str | None, dict[str, float | None]]:
    """One streamed request to `url`: (timing, serving replica, its cache deltas by tier)."""
    before = scrape(replicas, timeout)
    timing = kvcheck.stream_completion(url, model, prompt, max_tokens=max_tokens, timeout=timeout)
    after = scrape(replicas, timeout)
    name = served_by(before, after)
    tiers = kvcheck.tier_deltas(before[name], after[name]) if name else {}
    return timing, name, tiers


def ttft_sweep(
    replicas: Sequence[Replica],
    model: str,
    lengths: Sequence[int],
    repeats: int,
    count: prompts.Tokenizer | None,
    step: Step,
    timeout: float = DEFAULT_TIMEOUT,
) -> list[Sample]:
    """For each length and repeat, a fresh prompt: to replica A (cold), A again, then B."""
    samples: list[Sample] = []
    a = replicas[0]
    others = list(replicas[1:2])
    for tokens in lengths:
        for repeat in range(repeats):
            prompt, actual, _exact = prompts.sized_prompt(tokens, count)
            for case, target in [("cold", a), ("warm-same", a)] + [("warm-other", b) for b in others]:
                timing, name, tiers = measure(target.url, model, prompt, replicas, timeout=timeout)
                samples.append(
                    Sample(case, tokens, actual, repeat, timing["ttft_s"], timing["total_s"], name, tiers)
                )
                step(f"{case} {actual} tokens")
    return samples


def multi_turn(
    url: str,
    replicas: Sequence[Replica],
    model: str,
    turns: int,
    context_tokens: int,
    turn_words: int,
    count: prompts.Tokenizer | None,
    step: Step,
    timeout: float = DEFAULT_TIMEOUT,
) -> dict[str, Any]:
    """A conversation of `turns` turns, each resending the history, against the same conversation
    with a fresh nonce ahead of every turn (nothing reusable): the time the cache saves."""
    results: dict[str, Any] = {}
    for mode in ("cached", "uncached"):
        history, _tokens, _exact = prompts.sized_prompt(context_tokens, count)
        ttfts, totals = [], []
        for turn in range(turns):
            if turn:
                history = prompts.extend(history, turn_words, uuid.uuid4().hex[:8])
            prompt = history if mode == "cached" else f"{uuid.uuid4().hex} {history}"
            timing, _name, _tiers = measure(url, model, prompt, replicas, 16, timeout)
            history += timing["text"]
            ttfts.append(timing["ttft_s"])
            totals.append(timing["total_s"])
            step(f"multi-turn {mode} turn {turn + 1}")
        results[mode] = {"ttft_s": ttfts, "total_s": sum(totals)}
    results["speedup"] = results["uncached"]["total_s"] / results["cached"]["total_s"]
    return results


def concurrency(
    url: str,
    model: str,
    clients: int,
    tokens: int,
    count: prompts.Tokenizer | None,
    step: Step,
    timeout: float = DEFAULT_TIMEOUT,
) -> dict[str, Any]:
    """`clients` fresh prompts at once (cold), then the same prompts at once again (warm)."""
    batch = [prompts.sized_prompt(tokens, count)[0] for _ in range(clients)]
    results: dict[str, Any] = {"clients": clients, "tokens": tokens}
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        for case in ("cold", "warm"):
            timings = list(
                pool.map(lambda p: kvcheck.stream_completion(url, model, p, timeout=timeout), batch)
            )
            results[case] = [t["ttft_s"] for t in timings]
            step(f"concurrency {case}")
    return results
