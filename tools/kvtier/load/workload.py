"""The load benchmark's multi-tenant mix, written as a timed trace that `vllm bench serve` replays.

vLLM's `timed_trace` dataset reads one JSON object per line, `{"timestamp": s, "input_length": n,
"output_length": m, "hash_ids": [...]}` (the Mooncake trace format), and builds each prompt from its hash
ids: every id becomes `block_tokens` tokens drawn from a seed derived from the id, so two requests that
share leading ids share a token prefix exactly as traffic with a common system prompt does. The mix:

- **tenants' system prompts**: `system_prompts` of them, each `system_blocks` blocks, picked with Zipf
  popularity (rank r has weight 1 / r**zipf_s), so a few are hot and most are rare;
- **chat sessions** on a system prompt: a geometric number of turns (mean `mean_turns`), each turn the whole
  conversation so far plus `turn_blocks` new blocks, sent `think_s` (exponential mean) after the last;
- **one-off documents**: `document_share` of sessions are a single long prompt (`document_blocks` blocks)
  that nobody repeats, the traffic no cache helps.

Session starts and documents arrive open-loop (Poisson at `rate` per second); a QPS sweep replays the same
trace time-scaled (vLLM's `--timed-trace-sec-multiplier`), so every point sees the same requests.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MAX_REQUESTS = 100_000  # per point; a typo's extra zeros would generate for minutes


@dataclass(frozen=True)
class Mix:
    requests: int = 120
    rate: float = 1.0  # session starts and documents per second before time-scaling
    system_prompts: int = 8
    zipf_s: float = 1.2
    system_blocks: int = 4
    mean_turns: float = 3.0
    turn_blocks: int = 1
    think_s: float = 4.0
    document_share: float = 0.1
    document_blocks: int = 6
    output_tokens: int = 16
    block_tokens: int = 256  # tokens per hash id; the chart's LMCache chunk size, so shares align with L2
    max_prompt_tokens: int = 4096  # a session ends before its prompt would outgrow the model's context
    seed: int = 0
    id_base: int = 0  # first hash id: a sweep gives each point its own ids, so no point warms the next

    def __post_init__(self) -> None:
        infinite = [name for name, value in asdict(self).items() if not math.isfinite(value)]
        if infinite:
            raise ValueError("; ".join(f"{name} must be a finite number" for name in infinite))
        positive = ("requests", "rate", "system_prompts", "system_blocks", "turn_blocks", "block_tokens",
                    "document_blocks", "output_tokens", "think_s")  # fmt: skip
        problems = [f"{name} must be positive" for name in positive if not getattr(self, name) > 0]
        if self.id_base < 0:
            problems.append("id_base must be 0 or more")
        if self.requests > MAX_REQUESTS:
            problems.append(f"requests must be at most {MAX_REQUESTS}")
        if not self.zipf_s >= 0:
            problems.append("zipf_s must be 0 (all equally popular) or more")
        if not self.mean_turns >= 1:
            problems.append("mean_turns must be at least 1")
        if not 0 <= self.document_share <= 1:
            problems.append("document_share must be between 0 and 1")
        if (self.system_blocks + self.turn_blocks) * self.block_tokens > self.max_prompt_tokens:
            problems.append("one turn on a system prompt is longer than max_prompt_tokens")
        if self.document_blocks * self.block_tokens > self.max_prompt_tokens:
            problems.append("a document is longer than max_prompt_tokens")
        if problems:
            raise ValueError("; ".join(problems))


@dataclass(frozen=True)
class Request:
    timestamp: float
    hash_ids: tuple[int, ...]
    output_length: int
    kind: str  # "chat" or "document"
    session: int
    turn: int
    system_prompt: int | None  # rank (0 = most popular) of the session's system prompt
    input_length: int = field(default=0)

    def trace_line(self) -> dict[str, Any]:
        """The line vLLM's timed_trace reads (its default labels), plus our own fields it ignores."""
        return {
            "timestamp": round(self.timestamp, 6),
            "input_length": self.input_length,
            "output_length": self.output_length,
            "hash_ids": list(self.hash_ids),
            "kind": self.kind,
            "session": self.session,
            "turn": self.turn,
            "system_prompt": self.system_prompt,
        }


def zipf_weights(count: int, s: float) -> list[float]:
    return [1.0 / (rank + 1) ** s for rank in range(count)]


def generate(mix: Mix) -> list[Request]:
    """The mix's requests in arrival order (deterministic for a seed)."""
    rng = random.Random(mix.seed)
    base = mix.id_base
    fresh_ids = itertools.count(base + mix.system_prompts * mix.system_blocks)
    weights = zipf_weights(mix.system_prompts, mix.zipf_s)
    requests: list[Request] = []
    start = 0.0
    for session in itertools.count():
        if len(requests) >= mix.requests:
            break
        start += rng.expovariate(mix.rate)
        if rng.random() < mix.document_share:
            ids = tuple(next(fresh_ids) for _ in range(mix.document_blocks))
            requests.append(_request(mix, start, ids, "document", session, 0, None))
            continue
        rank = rng.choices(range(mix.system_prompts), weights)[0]
        ids = tuple(range(base + rank * mix.system_blocks, base + (rank + 1) * mix.system_blocks))
        requests.extend(_session(mix, rng, fresh_ids, start, ids, session, rank))
    requests.sort(key=lambda r: r.timestamp)
    return requests[: mix.requests]


def _session(
    mix: Mix, rng: random.Random, fresh_ids: Iterator[int], start: float, ids: tuple[int, ...],
    session: int, rank: int,
) -> Iterator[Request]:  # fmt: skip
    at = start
    for turn in itertools.count():
        ids = ids + tuple(next(fresh_ids) for _ in range(mix.turn_blocks))
        if len(ids) * mix.block_tokens > mix.max_prompt_tokens:
            return
        yield _request(mix, at, ids, "chat", session, turn, rank)
        # Geometric number of turns with mean `mean_turns`: go on with probability 1 - 1/mean.
        if rng.random() < 1.0 / mix.mean_turns:
            return
        at += rng.expovariate(1.0 / mix.think_s)


def _request(
    mix: Mix, at: float, ids: tuple[int, ...], kind: str, session: int, turn: int, rank: int | None
) -> Request:
    return Request(at, ids, mix.output_tokens, kind, session, turn, rank, len(ids) * mix.block_tokens)


def arrival_rate(requests: list[Request]) -> float:
    """Requests per second over the trace as written (first arrival to last)."""
    span = requests[-1].timestamp - requests[0].timestamp if len(requests) > 1 else 0.0
    return (len(requests) - 1) / span if span > 0 else float("inf")


def write_trace(requests: list[Request], path: Path, offset: float | None = None) -> Path:
    """The trace file, timestamps shifted so the first request goes at 0 (vLLM sleeps until each)."""
    first = requests[0].timestamp if offset is None else offset
    lines = [json.dumps({**r.trace_line(), "timestamp": round(r.timestamp - first, 6)}) for r in requests]
    path.write_text("\n".join(lines) + "\n")
    return path


def describe(mix: Mix) -> dict[str, Any]:
    return asdict(mix)


def ids_used(mix: Mix, requests: list[Request]) -> int:
    """How many hash ids a trace spans from its id_base: the next point's id_base goes past them."""
    return max(i for r in requests for i in r.hash_ids) - mix.id_base + 1
