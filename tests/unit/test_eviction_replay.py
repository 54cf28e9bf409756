"""The eviction benchmark's replay (kvtier.bench.eviction_replay) on a real directory, small enough to run
in the suite; benchmarks/eviction_bench.py prints the full comparison."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from kvtier.bench import eviction_replay


def test_a_hot_prompt_written_first_survives_only_with_recorded_hits(tmp_path: Path) -> None:
    """One hot prompt asked every 250 s among one-off prompts (one per 50 s, 4 chunks each) in a pool of 100
    chunks: the pool keeps 70 after a run (70%), about 17 requests' worth, so the hot prompt is always among
    the 70 most recently *used* chunks. The write-time order still evicts it whenever it is the oldest
    write; last use keeps it, as Belady's order does."""
    hot = [1, 2, 3, 4]
    requests = []
    for n in range(400):
        requests.append(hot if n % 5 == 0 else [1000 + 10 * n + j for j in range(4)])
    workload = eviction_replay.Workload(requests)
    outcomes = {
        policy: eviction_replay.replay(
            workload, policy, tmp_path / policy, capacity_chunks=100, rate_per_s=0.02
        )
        for policy in eviction_replay.POLICIES
    }
    hot_lookups = 80 * len(hot)
    written, last_use, belady = (outcomes[p].hit_chunks for p in eviction_replay.POLICIES)
    assert all(o.eviction_runs == int(399 / 0.02 / 300) for o in outcomes.values())  # every 5 minutes
    assert all(o.failed_writes == 0 for o in outcomes.values())
    assert last_use == belady == hot_lookups - len(hot), "every hot request but the first hits"
    assert written < last_use
    files = list((tmp_path / "last-use" / eviction_replay.NAMESPACE).iterdir())
    assert files and all(f.stat().st_size == eviction_replay.CHUNK_BYTES for f in files)
    assert files[0].name.startswith("Qwen-SEP-Qwen2-7B-Instruct@1@0@") and files[0].name.endswith(
        "@bfloat16.data"
    )


def test_the_generated_stream_has_the_three_kinds_of_reuse() -> None:
    workload = eviction_replay.generate(seed=3, requests=800)
    first_chunks = {r[0] for r in workload.requests}
    assert len(first_chunks) <= 8, "every prompt starts with one of the shared system prompts"
    seen: set[tuple[int, ...]] = set()
    extended = 0
    for request in workload.requests:
        extended += any(tuple(request[:k]) in seen for k in range(len(request) - 3, len(request)))
        seen.add(tuple(request))
    assert extended > 200, "multi-turn sessions extend an earlier prompt"
    assert workload.distinct_chunks > 5000
    systems = workload.system_chunks
    assert len(systems) == 8 and all(8 <= len(s) <= 32 for s in systems)
    assert all(any(r[: len(s)] == s for s in systems) for r in workload.requests), "keys as in the stream"
    asked = Counter(r[0] for r in workload.requests)
    assert [first for first, _ in asked.most_common(2)] == [s[0] for s in systems[:2]], "most popular first"
    assert eviction_replay.warmed_prefixes(workload) == systems[-2:], "the warm-up pins the least popular"


def test_warmed_and_pinned_chunks_never_miss_where_last_use_evicts_them(tmp_path: Path) -> None:
    """A prefix asked every 40 requests among one-off prompts (4 chunks, one per 50 s) in a pool of 100
    chunks: a run keeps 70 (about 17 requests' worth), so last use evicts the prefix between two asks and
    it misses every time. Warmed at t=0 and pinned (a real pin file, passed to every run), it never misses."""
    warm = [1, 2, 3, 4]
    requests = [warm if n % 40 == 0 else [1000 + 10 * n + j for j in range(4)] for n in range(400)]
    workload = eviction_replay.Workload(requests)
    plain, pinned = (
        eviction_replay.replay(
            workload, variant, tmp_path / variant, capacity_chunks=100, rate_per_s=0.02, warmed=[warm]
        )
        for variant in ("last-use", eviction_replay.PINNED)
    )
    assert plain.warmed_looked_up == pinned.warmed_looked_up == 10 * len(warm)
    assert plain.warmed_hits < plain.warmed_looked_up - len(warm), "unpinned, it misses after its first write"
    assert pinned.warmed_hit_ratio == 1.0
    assert pinned.failed_writes == plain.failed_writes == 0
    assert pinned.other_hit_ratio == plain.other_hit_ratio == 0.0, "the one-offs are never asked again"
    namespace = tmp_path / eviction_replay.PINNED / eviction_replay.NAMESPACE
    pin_file = json.loads((namespace / ".kvtier-warm" / "system-0.json").read_text())
    assert pin_file["files"] == [eviction_replay.chunk_name(key) for key in warm]
    assert all((namespace / name).exists() for name in pin_file["files"])


def test_unknown_policies_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="expected one of"):
        eviction_replay.replay(eviction_replay.Workload([[1]]), "fifo", tmp_path, 10)
    assert eviction_replay.PINNED not in eviction_replay.POLICIES, "the target compares the orders alone"
