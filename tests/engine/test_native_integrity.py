"""cache.l2.integrity on vLLM's native backend, against the pinned vLLM's own fs-tier I/O: what its reader
does with a chunk changed in place (loads it as KV: the reason for the sealed tier), that it still reads a
sealed file's KV, and that the chart's sealed tier (podscripts/l2_native.py) refuses the change where vLLM's
own failed reads stop. tests/engine/test_native_tiers.py shows the same on running engines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.engine import invariants

PROBE = Path(__file__).resolve().parents[1] / "harness" / "engine" / "native_io_probe.py"
BLOCK = 16 * 4096  # the probe's chunk slot
CASES = {
    "vllm writes, changed, vllm reads": {"writer": "vllm", "damage": "changed", "reader": "vllm"},
    "sealed writes, vllm reads": {"writer": "sealed", "damage": "none", "reader": "vllm"},
    "sealed writes, sealed reads": {"writer": "sealed", "damage": "none", "reader": "sealed"},
    "sealed writes, changed, sealed reads": {"writer": "sealed", "damage": "changed", "reader": "sealed"},
    "vllm writes, sealed reads": {"writer": "vllm", "damage": "none", "reader": "sealed"},
    "signature": {"signature": True},
    "tier": {"tier": True},
}


@pytest.fixture(scope="module")
def verdicts(work: Path) -> dict[str, dict[str, Any]]:
    found = invariants.run_cases(list(CASES.values()), "0", work / "native-io", PROBE)
    return dict(zip(CASES, found, strict=True))


def test_vllms_own_reader_loads_a_chunk_changed_in_place_as_kv(verdicts: dict[str, dict[str, Any]]) -> None:
    verdict = verdicts["vllm writes, changed, vllm reads"]
    assert verdict["sizes"] == [BLOCK, BLOCK]  # vLLM's file: the KV and nothing else
    assert verdict["loaded"] is True and verdict["same"] is False, verdict  # no error, and the KV is not ours


def test_vllms_own_reader_reads_a_sealed_files_kv(verdicts: dict[str, dict[str, Any]]) -> None:
    verdict = verdicts["sealed writes, vllm reads"]
    assert verdict["sizes"] == [BLOCK + 4096] * 2  # one trailer page each
    assert verdict["loaded"] is True and verdict["same"] is True, verdict


def test_the_sealed_tier_round_trips(verdicts: dict[str, dict[str, Any]]) -> None:
    verdict = verdicts["sealed writes, sealed reads"]
    assert verdict["loaded"] is True and verdict["same"] is True, verdict


def test_the_sealed_tier_refuses_the_change_where_vllms_failed_reads_stop(
    verdicts: dict[str, dict[str, Any]],
) -> None:
    verdict = verdicts["sealed writes, changed, sealed reads"]
    assert verdict["loaded"] is False and "failed verification (mismatch)" in verdict["error"], verdict
    # the first chunk loaded and is kept (vLLM's get_finished_jobs reads num_succeeded); the second is a miss
    assert verdict["num_succeeded"] == 1 and verdict["first_same"] is True, verdict


def test_the_sealed_tier_refuses_vllms_unsealed_files(verdicts: dict[str, dict[str, Any]]) -> None:
    verdict = verdicts["vllm writes, sealed reads"]
    assert verdict["loaded"] is False and "failed verification (unsealed)" in verdict["error"], verdict
    assert verdict["num_succeeded"] == 0, verdict


def test_the_sealed_tier_takes_exactly_vllms_fs_tier_arguments(verdicts: dict[str, dict[str, Any]]) -> None:
    """Spelled out in l2_native.py so an unknown key in the rendered tier config is refused as for `fs`; a
    vLLM release that changes the fs tier's constructor fails here."""
    verdict = verdicts["signature"]
    assert verdict["subclass"] is True and verdict["same_parameters"] is True, verdict


def test_vllms_factory_builds_the_sealed_tier_whose_jobs_keep_what_verified(
    verdicts: dict[str, dict[str, Any]],
) -> None:
    """The tier as the chart's tier config makes vLLM build it, through its job interface: the store seals
    every chunk; a load with the second chunk changed reports the job failed with only the chunk before it
    as loaded (what vLLM's manager keeps; the rest is recomputed), and that chunk's KV is the stored KV."""
    verdict = verdicts["tier"]
    assert verdict["class"] == "KvtierSealedFsTier" and verdict["store_success"] is True, verdict
    assert verdict["sizes"] == [BLOCK + 4096, None], verdict  # the refused chunk was removed
    assert (verdict["load_success"], verdict["kept"], verdict["kept_same"]) == (False, [0], True), verdict
    assert verdict["rejections"] == {"mismatch": 1}, verdict
