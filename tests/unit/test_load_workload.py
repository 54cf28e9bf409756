"""The load benchmark's mix (kvtier.load.workload): the trace vLLM's timed_trace replays.

Properties over generated mixes; the Zipf check's oracle is the popularity formula itself, compared with
observed session counts within sampling error."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtier.load import workload

mixes = st.builds(
    workload.Mix,
    requests=st.integers(1, 80),
    rate=st.floats(0.1, 20),
    system_prompts=st.integers(1, 12),
    zipf_s=st.floats(0, 2),
    system_blocks=st.integers(1, 4),
    mean_turns=st.floats(1, 6),
    turn_blocks=st.integers(1, 3),
    think_s=st.floats(0.1, 10),
    document_share=st.floats(0, 1),
    document_blocks=st.integers(1, 8),
    block_tokens=st.sampled_from([16, 128, 256]),
    max_prompt_tokens=st.just(4096),
    seed=st.integers(0, 2**16),
    id_base=st.integers(0, 10**6),
)


@settings(max_examples=150, deadline=None)
@given(mixes)
def test_a_trace_has_the_requests_asked_for_in_arrival_order_within_the_context(mix: workload.Mix) -> None:
    requests = workload.generate(mix)
    assert len(requests) == mix.requests
    assert [r.timestamp for r in requests] == sorted(r.timestamp for r in requests)
    for r in requests:
        assert r.input_length == len(r.hash_ids) * mix.block_tokens <= mix.max_prompt_tokens
        assert r.output_length == mix.output_tokens
        assert min(r.hash_ids) >= mix.id_base


@settings(max_examples=150, deadline=None)
@given(mixes)
def test_chats_start_with_their_system_prompt_and_each_turn_extends_the_last(mix: workload.Mix) -> None:
    requests = workload.generate(mix)
    sessions: dict[int, list[workload.Request]] = {}
    for r in requests:
        sessions.setdefault(r.session, []).append(r)
    for turns in sessions.values():
        first = turns[0]
        if first.kind == "document":
            assert len(turns) == 1 and len(first.hash_ids) == mix.document_blocks
            continue
        assert first.system_prompt is not None
        rank = first.system_prompt
        prompt = tuple(
            range(mix.id_base + rank * mix.system_blocks, mix.id_base + (rank + 1) * mix.system_blocks)
        )
        for before, after in itertools.pairwise(turns):
            assert after.turn == before.turn + 1 and after.timestamp >= before.timestamp
            assert after.hash_ids[: len(before.hash_ids)] == before.hash_ids
            assert len(after.hash_ids) == len(before.hash_ids) + mix.turn_blocks
        for turn in turns:
            assert turn.hash_ids[: mix.system_blocks] == prompt


@settings(max_examples=60, deadline=None)
@given(mixes)
def test_only_system_prompts_and_a_sessions_own_turns_share_ids(mix: workload.Mix) -> None:
    """A document's ids and a turn's new ids belong to that request's session alone."""
    owners: dict[int, set[int]] = {}
    shared = mix.id_base + mix.system_prompts * mix.system_blocks
    for r in workload.generate(mix):
        for block in r.hash_ids:
            if block >= shared:
                owners.setdefault(block, set()).add(r.session)
    assert all(len(sessions) == 1 for sessions in owners.values())


@settings(max_examples=60, deadline=None)
@given(mixes)
def test_the_same_seed_gives_the_same_trace_and_the_next_id_base_a_disjoint_one(mix: workload.Mix) -> None:
    first = workload.generate(mix)
    assert workload.generate(mix) == first
    following = dataclasses.replace(mix, id_base=mix.id_base + workload.ids_used(mix, first))
    used = {i for r in first for i in r.hash_ids}
    assert not used & {i for r in workload.generate(following) for i in r.hash_ids}


def test_system_prompt_popularity_follows_zipf_within_sampling_error() -> None:
    mix = workload.Mix(requests=4000, system_prompts=8, zipf_s=1.2, mean_turns=1, document_share=0, seed=7)
    counts = Counter(r.system_prompt for r in workload.generate(mix))
    total = sum(counts.values())
    weights = [1 / (rank + 1) ** 1.2 for rank in range(8)]
    for rank, weight in enumerate(weights):
        expected = weight / sum(weights)
        error = 4 * math.sqrt(expected * (1 - expected) / total)  # four standard errors
        assert abs(counts[rank] / total - expected) <= error, (rank, counts[rank] / total, expected)


def test_the_document_share_and_mean_turns_come_out_as_asked() -> None:
    mix = workload.Mix(requests=6000, document_share=0.2, mean_turns=3, max_prompt_tokens=100_000, seed=3)
    requests = workload.generate(mix)
    sessions = {r.session: r.kind for r in requests}
    documents = sum(1 for kind in sessions.values() if kind == "document")
    assert abs(documents / len(sessions) - 0.2) < 0.03
    chats = Counter(r.session for r in requests if r.kind == "chat")
    assert abs(sum(chats.values()) / len(chats) - 3) < 0.3  # the geometric mean, less the last sessions cut


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("requests", 0, "requests must be positive"),
        ("mean_turns", 0.5, "mean_turns must be at least 1"),
        ("document_share", 1.5, "document_share must be between 0 and 1"),
        ("document_blocks", 40, "a document is longer than max_prompt_tokens"),
        ("system_blocks", 40, "one turn on a system prompt is longer than max_prompt_tokens"),
    ],
)
def test_an_impossible_mix_is_refused_naming_the_setting(field: str, value: float, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        workload.Mix(**{field: value})


def test_the_trace_file_is_what_vllms_timed_trace_reads(tmp_path: Path) -> None:
    mix = workload.Mix(requests=20, seed=1)
    requests = workload.generate(mix)
    lines = [
        json.loads(line)
        for line in workload.write_trace(requests, tmp_path / "t.jsonl").read_text().splitlines()
    ]
    assert len(lines) == 20 and lines[0]["timestamp"] == 0
    for line, request in zip(lines, requests, strict=True):
        assert {"timestamp", "input_length", "output_length", "hash_ids"} <= set(line)
        assert line["hash_ids"] == list(request.hash_ids)
        assert line["timestamp"] == pytest.approx(request.timestamp - requests[0].timestamp, abs=1e-6)
    assert workload.arrival_rate(requests) == pytest.approx(
        19 / (requests[-1].timestamp - requests[0].timestamp)
    )
