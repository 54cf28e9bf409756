"""L2 failures on LMCache's real storage path end in a miss or a shorter hit, never in wrong KV or a dead
engine: each case stores a prompt's two chunks from one pod (configured from values/cpu.yaml's render, as in
test_lmcache_invariants.py), breaks the L2 the way production breaks it, and looks up from another pod.
vLLM then recomputes what LMCache did not load: the chart sets kv_load_failure_policy recompute
(test_l2_tiers.py shows a request served through a broken chunk file on the real engines).

A chunk changed in place (same size) is the one damage LMCache's own reader cannot see: the `unverified`
case (the chart's plugin with cache.l2.integrity off, which is LMCache's fs connector unchanged) loads it
as KV, and the chart's default (sealed files, podscripts/l2_integrity.py) refuses it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.engine import invariants
from kvtier.engine_rig import rendered, tiers
from kvtier.podscripts import l2_integrity

TINY = {"layers": 2, "kv_heads": 2, "head_size": 64}
TOKENS = invariants.prompt_tokens(600, seed=5)  # two whole chunks of 256
# One chunk file of TINY in values/cpu.yaml's dtype (bfloat16): K+V x layers x heads x dims x 2 bytes x 256
# tokens + LMCache's 28-byte header + the integrity trailer the chart's default adds.
CHUNK_BYTES = 2 * 2 * 2 * 64 * 2 * 256 + 28 + l2_integrity.TRAILER_BYTES
DAMAGES = ("race", "truncated", "zero-length", "crashed-writer", "wiped", "full", "read-only")
DAMAGES += ("changed-in-place", "changed-in-place-unverified")


@pytest.fixture(scope="module")
def small_fs(work: Path) -> Iterator[Path | str]:
    """A 400 KiB tmpfs (room for one chunk file of TINY and not a second one) and work/ro-fs, a tmpfs of its
    own to turn read-only; or why they cannot be made."""
    mount, read_only = work / "small", work / "ro-fs"
    made = []
    for path, size in ((mount, "400k"), (read_only, "2m")):
        path.mkdir()
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
        )
        if proc.returncode != 0:
            for done in made:
                subprocess.run(["umount", "-l", str(done)], check=False)
            yield f"cannot mount a small tmpfs here (needs root): {proc.stderr.strip()}"
            return
        made.append(path)
    try:
        yield mount
    finally:
        for done in made:
            subprocess.run(["umount", "-l", str(done)], check=False)


def chunks_in_order(pod: invariants.Pod) -> list[Path]:
    """The stored chunk files, most likely first chunk first (LMCache writes them in prompt order, but two
    writes may share one mtime, so the checks below hold for either order)."""
    return sorted(pod.l2_dir.glob("*.data"), key=lambda p: p.stat().st_mtime_ns)


@pytest.fixture(scope="module")
def outcomes(work: Path, small_fs: Path | str) -> dict[str, dict[str, Any]]:
    """Every damage on its own L2 namespace: one process stores all, the damage is done, one process looks up
    all (two engine-venv processes in all instead of two per case)."""
    engine = rendered.render_engine([tiers.CPU_VALUES], {}, work / "render")
    mountable = isinstance(small_fs, Path)
    volumes = {"full": small_fs, "read-only": work / "ro-fs"}
    pods = {}
    for damage in DAMAGES:
        if damage in volumes and not mountable:
            continue
        volume = volumes.get(damage, work / damage / "l2")
        pods[damage] = invariants.pod_case(engine, Path(volume), work / damage, TINY)
    unverified = pods["changed-in-place-unverified"]
    extra = yaml.safe_load(Path(unverified.case["config"]).read_text())["extra_config"]
    extra["remote_storage_plugin.kvtier_l2.verify"] = False  # cache.l2.integrity: false
    unverified.case["config"] = invariants.variant_config(unverified, work, "unverified", extra_config=extra)
    seed = next(iter(pods.values())).seed
    stores = [{**pod.case, "tokens": TOKENS, "kv_seed": 1, "action": "store"} for pod in pods.values()]
    if "full" in pods:
        # The full L2 takes the first chunk, then the second chunk alone (as vLLM stores past a prefix it
        # already stored): LMCache writes a prompt's chunks concurrently, and two writers racing for the last
        # free bytes may both fail, so only one write at a time tells what a full L2 does.
        full = list(pods).index("full")
        stores[full]["tokens"] = TOKENS[:256]
        stores.append(
            {**pods["full"].case, "tokens": TOKENS, "skip_prefix": 256, "kv_seed": 1, "action": "store"}
        )
    verdicts = invariants.run_cases(stores, seed, work)
    stored = dict(zip(pods, verdicts[: len(pods)], strict=True))

    changed = ("changed-in-place", "changed-in-place-unverified")
    second = {
        name: chunks_in_order(pods[name])[1]
        for name in ("truncated", "zero-length", "crashed-writer", *changed)
    }
    for name in changed:  # a run of KV bytes inverted inside the file: header and size as written
        data = bytearray(second[name].read_bytes())
        data[1028:1092] = bytes(b ^ 0xFF for b in data[1028:1092])
        second[name].write_bytes(bytes(data))
    second["truncated"].write_bytes(second["truncated"].read_bytes()[: CHUNK_BYTES // 2])
    second["zero-length"].write_bytes(b"")
    second["crashed-writer"].rename(
        second["crashed-writer"].with_name(second["crashed-writer"].name + ".tmp")
    )
    shutil.rmtree(pods["wiped"].l2_dir)
    lookups = []
    for name, pod in pods.items():
        lookups.append({**pod.case, "tokens": TOKENS, "kv_seed": 1, "action": "lookup"})
        if name == "race":
            lookups[-1]["fault"] = "delete_after_lookup"
    if mountable:
        subprocess.run(["mount", "-o", "remount,ro", str(work / "ro-fs")], check=True)
        fresh = invariants.prompt_tokens(600, seed=9)
        lookups.append({**pods["read-only"].case, "tokens": fresh, "kv_seed": 4, "action": "store"})
    try:
        found, log = invariants.run_cases_logged(lookups, seed, work)
    finally:
        if mountable:
            subprocess.run(["mount", "-o", "remount,rw", str(work / "ro-fs")], check=False)
    result = {
        name: {"stored": stored[name], "found": found[i], "pod": pods[name]} for i, name in enumerate(pods)
    }
    if "read-only" in pods:
        result["read-only"]["store_after"] = found[-1]
    if "full" in pods:
        result["full"]["stored_past_full"] = verdicts[-1]
    for name, outcome in result.items():
        outcome["log"] = log
        outcome["files"] = (
            sorted(p.stat().st_size for p in outcome["pod"].l2_dir.glob("*.data")) if name != "wiped" else []
        )
    return result


def test_every_damage_was_stored_first(outcomes: dict[str, dict[str, Any]]) -> None:
    for name, outcome in outcomes.items():
        expected = 1 if name == "full" else 2
        assert outcome["stored"]["error"] is None and outcome["stored"]["stored_files"] == expected, (
            name,
            outcome,
        )


def test_chunk_deleted_between_lookup_and_read_is_a_clean_miss(outcomes: dict[str, dict[str, Any]]) -> None:
    found = outcomes["race"]["found"]
    assert found["error"] is None, found
    assert found["hit_tokens"] == 512 and found["retrieved_tokens"] == 0  # nothing wrong was loaded
    assert found["lookup_after"] == 0  # and the engine answers the next lookup


@pytest.mark.parametrize("damage", ["truncated", "zero-length"])
def test_a_damaged_second_chunk_keeps_only_the_good_prefix(
    outcomes: dict[str, dict[str, Any]], damage: str
) -> None:
    found = outcomes[damage]["found"]
    assert found["error"] is None, found
    assert found["retrieved_tokens"] <= 256, found  # at most the first chunk, never the damaged one
    if found["retrieved_tokens"]:
        assert found["data_ok"] is True, found


def test_a_chunk_changed_in_place_is_loaded_as_kv_without_integrity(
    outcomes: dict[str, dict[str, Any]],
) -> None:
    """The fault integrity exists for, shown on LMCache's own reader: both chunks load, one of them wrong."""
    found = outcomes["changed-in-place-unverified"]["found"]
    assert found["error"] is None and found["retrieved_tokens"] == 512, found
    assert found["data_ok"] is False, found


def test_a_chunk_changed_in_place_is_a_miss_with_integrity(outcomes: dict[str, dict[str, Any]]) -> None:
    outcome = outcomes["changed-in-place"]
    found = outcome["found"]
    assert found["error"] is None and found["hit_tokens"] == 512, found  # the lookup still sees both files
    assert found["retrieved_tokens"] <= 256, found  # never the changed chunk
    if found["retrieved_tokens"]:
        assert found["data_ok"] is True, found
    assert len(outcome["files"]) == 1, outcome["files"]  # the rejected file was removed: the next store heals
    assert "failed verification (mismatch), served as a miss and removed" in outcome["log"]


def test_a_tmp_file_left_by_a_crashed_writer_is_invisible(outcomes: dict[str, dict[str, Any]]) -> None:
    # Which of the two files was renamed is not known for sure (both may carry one mtime): either way the
    # `.tmp` chunk is never seen, so the lookup stops before it (0 or 256 tokens, never 512).
    found = outcomes["crashed-writer"]["found"]
    assert found["error"] is None and found["hit_tokens"] in (0, 256), found
    if found["hit_tokens"]:
        assert found["data_ok"] is True, found


def test_a_wiped_namespace_is_a_miss(outcomes: dict[str, dict[str, Any]]) -> None:
    found = outcomes["wiped"]["found"]
    assert found["error"] is None and found["hit_tokens"] == 0, found


def test_a_full_l2_stores_what_fits_and_never_leaves_a_partial_chunk(
    outcomes: dict[str, dict[str, Any]], need
) -> None:
    need("full" in outcomes, "no small tmpfs on this machine (mount needs root)")
    full = outcomes["full"]
    past = full["stored_past_full"]
    assert past["error"] is None and past["stored_files"] == 0 and past["failed_puts"] == 1, past  # ENOSPC
    assert full["files"] == [CHUNK_BYTES], full["files"]  # no torn final file
    assert not list(full["pod"].l2_dir.glob("*.tmp"))  # LMCache removed its partial write
    assert full["found"]["error"] is None and full["found"]["hit_tokens"] == 256, full["found"]


def test_a_read_only_l2_serves_what_it_holds_and_stores_nothing(
    outcomes: dict[str, dict[str, Any]], need
) -> None:
    need("read-only" in outcomes, "no small tmpfs on this machine (mount needs root)")
    ro = outcomes["read-only"]
    assert ro["found"]["error"] is None and ro["found"]["hit_tokens"] == 512, ro["found"]
    assert ro["store_after"]["error"] is None and ro["store_after"]["stored_files"] == 0, ro["store_after"]
