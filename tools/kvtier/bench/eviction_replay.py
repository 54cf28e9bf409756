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

The "last-use+pins" variant adds the L2 warm-up: the chunks of the most popular system prompts are written
at t=0, each prompt's pin file (`<namespace>/.kvtier-warm/<prefix>.json`) names them, and every eviction
run passes the listed prefixes' pins (l2_evict.read_pins) so they are never evicted. Every replay counts
the hits on those warmed chunks apart from the others, so pinning's gain and its cost read side by side.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kvtier.podscripts import l2_evict, l2_hits, l2_scan

NAMESPACE = "qwen2-7b.313e7cf84856"
CHUNK_BYTES = 256 * 28 * 2 * 4 * 128 * 2 + 28  # Qwen2-7B, bfloat16: 256 tokens x 28 layers x K,V x 4 x 128
POLICIES = ("written", "last-use", "belady")
PINNED = "last-use+pins"  # last use, with the most popular system prompts warmed and pinned
WARMED_SYSTEMS = 2  # of generate()'s 8 system prompts


@dataclass(frozen=True)
class Workload:
    """Requests, each the chunk keys of its prompt in order (a key stands for the prefix up to its chunk);
    `system_chunks` the keys of each shared system prompt, most popular first."""

    requests: list[list[int]]
    system_chunks: list[list[int]] = field(default_factory=list)

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
    system_keys = []  # after the prompts', so the stream's keys are the same with or without them
    for system in systems:
        keys, prefix = [], 0
        for piece in system:
            prefix = ids.setdefault((prefix, piece), len(ids) + 1)
            keys.append(prefix)
        system_keys.append(keys)
    return Workload(keyed, system_keys)


def warmed_prefixes(workload: Workload, systems: int = WARMED_SYSTEMS) -> list[list[int]]:
    """The chunk keys of the `systems` least popular system prompts: what the warm-up writes and pins. The
    least popular, because pinning is for a prefix listed for its worth, not its rate: last use keeps the
    popular ones anyway."""
    return workload.system_chunks[-systems:] if systems else []


def chunk_name(key: int) -> str:
    return f"Qwen-SEP-Qwen2-7B-Instruct@1@0@{key:016x}@bfloat16.data"


@dataclass(frozen=True)
class Outcome:
    policy: str
    hit_chunks: int
    looked_up_chunks: int
    eviction_runs: int
    failed_writes: int
    warmed_hits: int = 0  # of hit_chunks, those of the warmed prefixes' chunks (pinned or not)
    warmed_looked_up: int = 0

    @property
    def hit_ratio(self) -> float:
        return self.hit_chunks / self.looked_up_chunks if self.looked_up_chunks else 0.0

    @property
    def warmed_hit_ratio(self) -> float:
        return self.warmed_hits / self.warmed_looked_up if self.warmed_looked_up else 0.0

    @property
    def other_hit_ratio(self) -> float:
        others = self.looked_up_chunks - self.warmed_looked_up
        return (self.hit_chunks - self.warmed_hits) / others if others else 0.0


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
    warmed: Sequence[Sequence[int]] | None = None,
) -> Outcome:
    """One policy over the whole stream on a fresh directory. `warmed`: the prefixes (chunk keys) whose
    hits are counted apart, and which PINNED writes at t=0 and pins; default warmed_prefixes(workload)."""
    if policy not in (*POLICIES, PINNED):
        raise ValueError(f"policy {policy!r}: expected one of {(*POLICIES, PINNED)}")
    shutil.rmtree(directory, ignore_errors=True)
    namespace = directory / NAMESPACE
    namespace.mkdir(parents=True)
    capacity = capacity_chunks * CHUNK_BYTES
    present: set[int] = set()
    prefixes = warmed_prefixes(workload) if warmed is None else warmed
    warmed_keys = {key for prefix in prefixes for key in prefix}
    listing = directory.with_name(directory.name + ".pins")  # the chart's listing, outside the L2 root
    if policy == PINNED:
        present = _warm_up(namespace, prefixes, capacity, listing)
    current = [0]
    rank = _belady(workload, lambda: current[0]) if policy == "belady" else None
    hits = looked_up = runs = failed = warmed_hits = warmed_looked_up = 0
    next_run = period_s
    for index, request in enumerate(workload.requests):
        current[0] = index
        now = index / rate_per_s
        if now >= next_run:
            pins = l2_evict.read_pins(str(directory), str(listing)) if policy == PINNED else None
            if pins is not None and (pins.missing or pins.unreadable):
                raise RuntimeError(f"the replay's own pin files: {pins.missing + pins.unreadable}")
            l2_evict.evict(
                str(directory),
                high=high,
                low=low,
                capacity=str(capacity),
                min_age_s=min_age_s,
                now=now,
                order="written" if policy == "written" else "last-use",
                rank=rank,
                pins=pins,
            )
            present = {int(n.split("@")[3], 16) for n in os.listdir(namespace) if n.endswith(".data")}
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
        if warmed_keys:
            warmed_hits += sum(key in warmed_keys for key in request[:served])
            warmed_looked_up += sum(key in warmed_keys for key in request)
        for key in request[served:]:
            if key in present:
                continue
            if (len(present) + 1) * CHUNK_BYTES > capacity:
                failed += 1  # ENOSPC: LMCache logs the failed put and serves on
                break
            _write_chunk(namespace, key, now_ns)
            present.add(key)
    return Outcome(policy, hits, looked_up, runs, failed, warmed_hits, warmed_looked_up)


def _write_chunk(namespace: Path, key: int, now_ns: int) -> None:
    path = namespace / chunk_name(key)
    with open(path, "wb") as handle:
        handle.truncate(CHUNK_BYTES)  # sparse: a big pool costs no disk
    os.utime(path, ns=(now_ns, now_ns))


def _warm_up(namespace: Path, prefixes: Sequence[Sequence[int]], capacity: int, listing: Path) -> set[int]:
    """The warm-up at t=0: each prefix's chunks written (as far as they fit), a pin file per prefix
    naming them, and the listing of the pinned prefixes; returns the keys written."""
    written: set[int] = set()
    pin_dir = namespace / l2_scan.PIN_DIR
    pin_dir.mkdir()
    names = []
    for index, prefix in enumerate(prefixes):
        name = f"system-{index}"
        files = []
        for key in prefix:
            if key not in written and (len(written) + 1) * CHUNK_BYTES > capacity:
                break
            if key not in written:
                _write_chunk(namespace, key, 0)
                written.add(key)
            files.append(chunk_name(key))
        (pin_dir / f"{name}.json").write_text(json.dumps({"prefix": name, "files": files}))
        names.append(f"{namespace.name}/{name}")
    listing.write_text("".join(f"{name}\n" for name in names))
    return written
