"""Replays a generated request stream against a real L2 directory and the real eviction job (l2_evict.py) to
compare eviction orders by L2 hit ratio: write time (the chart without hit recording), last use (with the
engines' hit recorder, l2_hits.py) and Belady's farthest-next-use (the offline optimum, which knows the
future).

The directory is laid out as LMCache's fs connector writes it for the umbrella (one namespace directory,
`<model>@<world>@<worker>@<chunk hash>@<dtype>.data` files of one chunk's size, sparse so a big pool costs
no disk). Requests arrive on a simulated clock; a lookup hits the longest prefix of chunks on disk (LMCache
stops at the first missing chunk), records each hit with l2_hits.set_atime when the policy records hits, and
writes the chunks past the hit (LMCache stores what vLLM computed); a write that does not fit fails, as on
a full volume. Every `period_s` the eviction job runs with the chart's watermarks and minimum age.
"""

from __future__ import annotations

import os
import random
import shutil
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kvtier.podscripts import l2_evict, l2_hits

NAMESPACE = "qwen2-7b.313e7cf84856"
CHUNK_BYTES = 256 * 28 * 2 * 4 * 128 * 2 + 28  # Qwen2-7B, bfloat16: 256 tokens x 28 layers x K,V x 4 x 128
POLICIES = ("written", "last-use", "belady")


@dataclass(frozen=True)
class Workload:
    """Requests, each the chunk keys of its prompt in order (a key stands for the prefix up to its chunk)."""

    requests: list[list[int]]

    @property
    def distinct_chunks(self) -> int:
        return len({key for request in self.requests for key in request})


def generate(seed: int = 1, requests: int = 6000, sessions_in_flight: int = 200) -> Workload:
    """Shared system prompts (8-32 chunks, Zipf popularity), multi-turn sessions (2-10 turns, each turn the
    whole conversation so far plus 1-3 chunks, interleaved with others') and one-off documents (8-40 chunks
    after a system prompt, never asked again)."""
    rng = random.Random(seed)
    systems = [[("system", s, i) for i in range(rng.randint(8, 32))] for s in range(8)]
    popularity = [1 / (rank + 1) for rank in range(len(systems))]
    active: list[list] = []  # [conversation so far, turns left]
    prompts: list[list[tuple]] = []
    for n in range(requests):
        system = rng.choices(systems, popularity)[0]
        draw = rng.random()
        if draw < 0.15 or not active:
            conversation = [*system, *[("user", n, j) for j in range(rng.randint(1, 4))]]
            active.append([conversation, rng.randint(2, 10)])
            prompts.append(conversation)
        elif draw < 0.40:
            prompts.append([*system, *[("document", n, j) for j in range(rng.randint(8, 40))]])
        else:
            session = rng.choice(active[-sessions_in_flight:])
            session[0] = [*session[0], *[("turn", n, j) for j in range(rng.randint(1, 3))]]
            session[1] -= 1
            prompts.append(session[0])
            if session[1] <= 0:
                active.remove(session)
    keyed: list[list[int]] = []
    ids: dict[tuple, int] = {}  # ids, not hash(): the same stream in every process
    for prompt in prompts:  # LMCache's chunk hash chains every chunk to the ones before it
        keys, prefix = [], 0
        for piece in prompt:
            prefix = ids.setdefault((prefix, piece), len(ids) + 1)
            keys.append(prefix)
        keyed.append(keys)
    return Workload(keyed)


def chunk_name(key: int) -> str:
    return f"Qwen-SEP-Qwen2-7B-Instruct@1@0@{key:016x}@bfloat16.data"


@dataclass(frozen=True)
class Outcome:
    policy: str
    hit_chunks: int
    looked_up_chunks: int
    eviction_runs: int
    failed_writes: int

    @property
    def hit_ratio(self) -> float:
        return self.hit_chunks / self.looked_up_chunks if self.looked_up_chunks else 0.0


def _belady(
    workload: Workload, clock: Callable[[], int]
) -> Callable[[list[l2_evict.Chunk]], list[l2_evict.Chunk]]:
    """The offline optimum's order: the chunk whose next use is farthest away (or never) first."""
    uses: dict[str, list[int]] = defaultdict(list)
    for index, request in enumerate(workload.requests):
        for key in request:
            uses[chunk_name(key)].append(index)

    def next_use(chunk: l2_evict.Chunk) -> int:
        times = uses.get(chunk.name, [])
        at = bisect_left(times, clock())
        return times[at] if at < len(times) else len(workload.requests) + 1

    return lambda chunks: sorted(chunks, key=next_use, reverse=True)


def replay(
    workload: Workload,
    policy: str,
    directory: Path,
    capacity_chunks: int,
    rate_per_s: float = 2.0,
    period_s: float = 300.0,
    min_age_s: float = 120.0,
    high: str = "85%",
    low: str = "70%",
) -> Outcome:
    """One policy over the whole stream on a fresh directory."""
    if policy not in POLICIES:
        raise ValueError(f"policy {policy!r}: expected one of {POLICIES}")
    shutil.rmtree(directory, ignore_errors=True)
    namespace = directory / NAMESPACE
    namespace.mkdir(parents=True)
    capacity = capacity_chunks * CHUNK_BYTES
    present: set[int] = set()
    current = [0]
    rank = _belady(workload, lambda: current[0]) if policy == "belady" else None
    hits = looked_up = runs = failed = 0
    next_run = period_s
    for index, request in enumerate(workload.requests):
        current[0] = index
        now = index / rate_per_s
        if now >= next_run:
            l2_evict.evict(
                str(directory),
                high=high,
                low=low,
                capacity=str(capacity),
                min_age_s=min_age_s,
                now=now,
                order="written" if policy == "written" else "last-use",
                rank=rank,
            )
            present = {int(name.split("@")[3], 16) for name in os.listdir(namespace)}
            runs += 1
            next_run += period_s
        now_ns = int(now * 1e9)
        served = 0
        while served < len(request) and request[served] in present:
            if policy != "written":  # the chart without recordHits leaves no trace of a read
                l2_hits.set_atime(str(namespace / chunk_name(request[served])), now_ns)
            served += 1
        hits += served
        looked_up += len(request)
        for key in request[served:]:
            if key in present:
                continue
            if (len(present) + 1) * CHUNK_BYTES > capacity:
                failed += 1  # ENOSPC: LMCache logs the failed put and serves on
                break
            path = namespace / chunk_name(key)
            with open(path, "wb") as handle:
                handle.truncate(CHUNK_BYTES)
            os.utime(path, ns=(now_ns, now_ns))
            present.add(key)
    return Outcome(policy, hits, looked_up, runs, failed)
