"""The vllm-native backend for real on CPU: two vLLM replicas started from the container the chart renders
for values/cpu.yaml with `cache.backend: vllm-native` share KV through vLLM's own OffloadingConnector: its
CPU tier (L1) and its `fs` tier on one directory (L2), both vLLM's code; only the block copy between the
engine and the CPU tier is our stand-in (tools/offload-cpu-copy, checked against vLLM's descriptors in
test_offload_cpu_copy.py). The files the engine writes are the ones offload_key_probe.py computes, which
test_native_invariants.py varies setting by setting. Timings are printed, never asserted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.engine import native_keys
from kvtier import waiting
from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig import tiers
from kvtier.plan import capacity
from kvtier.podscripts import kvcheck, l2_integrity

pytestmark = pytest.mark.tiered_rig(tiers.NATIVE)


@pytest.fixture(scope="module")
def native(tiered_rig) -> tiers.TieredRig:
    return tiered_rig(tiers.NATIVE)


@pytest.fixture(scope="module")
def crossed(native: tiers.TieredRig) -> dict[str, Any]:
    """A prompt computed on replica 0, then asked on replica 1 (its first request with it); `files` are the
    chunk files it wrote (the shared rig's L2 may hold other modules' files already)."""
    prompt = kvcheck.long_prompt(1500)
    token_ids = tiers.prompt_token_ids(native.started[0].url, prompt)
    tokens = len(token_ids)
    before = set(native.chunk_files())
    cold = tiers.ask(native, 0, prompt, "cold (replica 0)")
    files = [f for f in native.wait_for_chunks(len(before) + tokens // native.chunk_size) if f not in before]
    l2 = tiers.ask(native, 1, prompt, "fs tier hit (replica 1, first time)")
    print(
        f"native backend: {tokens} tokens, TTFT cold {cold.ttft_ms:.0f} ms, fs-tier hit {l2.ttft_ms:.0f} ms"
    )
    return {
        "prompt": prompt,
        "tokens": tokens,
        "token_ids": token_ids,
        "cold": cold,
        "l2": l2,
        "files": files,
    }


def test_the_rig_runs_the_chart_rendered_offloading_connector(native: tiers.TieredRig) -> None:
    assert native.engine is not None and native.engine.lmcache_config == {}
    transfer = json.loads(native.engine.args[native.engine.args.index("--kv-transfer-config") + 1])
    assert transfer["kv_connector"] == "OffloadingConnector" and transfer["engine_id"] == "$(POD_NAME)"
    extra = transfer["kv_connector_extra_config"]
    assert (extra["spec_name"], extra["block_size"], extra["cpu_bytes_to_use"]) == (
        "TieringOffloadingSpec",
        256,
        2**30,  # the rig's cache.l1.size: 1 (GiB)
    )
    assert native.engine.pod_name_env == ["POD_NAME"]
    # The fs tier's root is the model's own namespace inside the one shared volume.
    assert native.l2_dir is not None and native.l2_dir.parent == native.work_dir / "l2"
    assert native.l2_dir.name.startswith(f"{engine_rig.MODEL_NAME}.")


def test_other_replica_hits_whole_chunks_from_the_fs_tier_with_identical_output(
    crossed: dict[str, Any],
) -> None:
    whole_chunks = crossed["tokens"] // 256 * 256
    assert crossed["cold"].hit_tokens == 0
    assert crossed["l2"].hit_tokens == whole_chunks > 0, (
        "replica 1's first request must load every whole chunk"
    )
    assert crossed["l2"].text == crossed["cold"].text, (
        "greedy output differs between the cold and fs-tier path"
    )


def test_fs_tier_files_are_where_eviction_looks_and_the_planners_size(
    crossed: dict[str, Any], native: tiers.TieredRig
) -> None:
    files: list[Path] = crossed["files"]
    assert native.l2_dir is not None and len(files) == crossed["tokens"] // 256
    assert list(native.l2_dir.glob("*/config.json")), "vLLM describes its layout beside the files"
    spec = capacity.load_model_config(native.work_dir / "models" / engine_rig.MODEL_NAME / "config.json")
    planned = capacity.Deployment(
        model=spec, dtype_bytes=4, kv_dtype_bytes=4, chunk=256, backend=tiers.NATIVE
    )
    expected = capacity.chunk_file_bytes(planned)  # float32 KV, what `kvtier plan` says
    assert {f.stat().st_size for f in files} == {expected}
    everything = len(native.chunk_files())  # this module's and any earlier module's
    outcome = kvcheck.check_l2_files(str(native.work_dir / "l2"), minimum=everything)
    assert outcome["ok"] and outcome["chunks"] == everything, outcome  # helm test's l2-files


def test_the_engine_writes_the_files_vllms_own_key_code_names(
    crossed: dict[str, Any], native: tiers.TieredRig
) -> None:
    """The probe behind test_native_invariants.py, given this rig's rendered pod and the prompt's token ids,
    names exactly the files the running engine wrote: its stand-in KV description (layer names, heads, block
    size) is the engine's as far as vLLM's keys go."""
    assert native.engine is not None
    config = json.loads((native.work_dir / "models" / engine_rig.MODEL_NAME / "config.json").read_text())
    shape = {"layers": config["num_hidden_layers"], "kv_heads": config["num_key_value_heads"]}
    pod = native_keys.pod_case(native.engine, native.work_dir / "l2", native.work_dir, shape)
    [verdict] = native_keys.run_cases(
        [{**pod.case, "tokens": crossed["token_ids"]}], pod.seed, native.work_dir
    )
    assert verdict["error"] is None, verdict["error"]
    assert sorted(verdict["files"]) == [str(f) for f in crossed["files"]]


def test_a_removed_fs_tier_file_is_a_clean_recompute(
    crossed: dict[str, Any], native: tiers.TieredRig
) -> None:
    del crossed  # after the cross-replica hit, whose files this must not disturb
    prompt = kvcheck.long_prompt(1200)
    tokens = tiers.prompt_tokens(native.started[0].url, prompt)
    before = set(native.chunk_files())
    first = tiers.ask(native, 0, prompt, "fresh prompt on replica 0")
    native.wait_for_chunks(len(before) + tokens // native.chunk_size)
    for path in set(native.chunk_files()) - before:
        path.unlink()  # what the eviction CronJob does
    gone = tiers.ask(native, 1, prompt, "fs-tier files removed (replica 1)")
    assert gone.hit_tokens == 0 and gone.text == first.text


def native_seal_problem(path: Path, root: Path) -> str | None:
    """Why the fs-tier file at `path` is not sealed for its own name below `root` (None: it is): the KV
    is all but the last page (l2_integrity's layout for the native tier)."""
    data = path.read_bytes()
    kv, page = data[: -l2_integrity.PAGE_BYTES], data[-l2_integrity.PAGE_BYTES :]
    return l2_integrity.page_problem(str(path.relative_to(root)), kv, page)


def test_the_fs_tier_is_the_charts_sealed_one(crossed: dict[str, Any], native: tiers.TieredRig) -> None:
    """cache.l2.integrity (values/cpu.yaml leaves the default on): vLLM loads the chart's sealed tier by
    module_path, and every chunk file it wrote carries its trailer page."""
    assert native.engine is not None and native.l2_dir is not None
    transfer = json.loads(native.engine.args[native.engine.args.index("--kv-transfer-config") + 1])
    [tier] = transfer["kv_connector_extra_config"]["secondary_tiers"]
    assert (tier["type"], tier["module_path"]) == ("KvtierSealedFsTier", "l2_native")
    assert [native_seal_problem(f, native.l2_dir) for f in crossed["files"]] == [None] * len(crossed["files"])


def test_a_chunk_changed_in_place_is_a_miss_and_the_next_store_heals_it(
    crossed: dict[str, Any], native: tiers.TieredRig
) -> None:
    """The damage vLLM's own fs reader loads as KV (test_native_integrity.py): replica 1 refuses the changed
    chunk, answers as replica 0 did, logs the file, and its store of the recomputed chunk seals a good file
    under the same name."""
    del crossed
    assert native.l2_dir is not None
    prompt = kvcheck.long_prompt(1300) + " changed in place"
    tokens = tiers.prompt_tokens(native.started[0].url, prompt)
    before = set(native.chunk_files())
    first = tiers.ask(native, 0, prompt, "fresh prompt on replica 0")
    written = sorted(set(native.wait_for_chunks(len(before) + tokens // native.chunk_size)) - before)
    changed = written[len(written) // 2]
    data = bytearray(changed.read_bytes())
    middle = len(data) // 3  # inside the KV, not the trailer page
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    changed.write_bytes(bytes(data))
    second = tiers.ask(native, 1, prompt, "a chunk changed in place (replica 1)")
    assert second.text == first.text, "the answer after a refused chunk differs from replica 0's"
    assert second.hit_tokens < tokens // 256 * 256, "the changed chunk was loaded"
    log = native.started[1].log.read_text(errors="replace")
    assert f"{changed} failed verification (mismatch), served as a miss and removed" in log
    waiting.wait_until(  # replica 1 stores the chunk it recomputed: a sealed file under the same name
        lambda: native_seal_problem(changed, native.l2_dir) is None,
        deadline=waiting.deadline_in(30),
        fail=lambda last: AssertionError(f"{changed.name} was not stored again after it was refused{last}"),
        tolerate=(FileNotFoundError,),
        interval=0.2,
    )


def test_helm_tests_crosspod_check_passes_on_the_rendered_engines(
    crossed: dict[str, Any], native: tiers.TieredRig
) -> None:
    del crossed
    a, b = (process.url for process in native.started)
    outcome = kvcheck.check_crosspod(a, b, engine_rig.MODEL_NAME, words=1200, settle_s=2)
    print(f"[native] crosspod: {outcome['summary']}; A's L2 writes: {outcome['a_l2_writes']}")
    assert outcome["ok"] is True, outcome["summary"]
    assert outcome["b"]["external_hit_tokens"] >= 1024
    # B was asked once vLLM's own metrics said A's cascade to the fs tier had landed, not after a guess
    assert outcome["a_l2_writes"]["landed"] is True, outcome["a_l2_writes"]


def test_a_crashed_replica_takes_its_cpu_tier_region_over(
    crossed: dict[str, Any], native: tiers.TieredRig
) -> None:
    """The chart's engine_id is the pod name: a container killed without cleaning up (OOM, SIGKILL) and
    restarted in the same pod reopens the CPU tier's region in /dev/shm instead of adding another (with
    vLLM's random default, each restart leaks one: vLLM issues #51579, #54002). Runs last: it restarts
    replica 1."""
    region = native.shm_region(1)
    assert region.exists(), f"no CPU-tier region at {region}"
    inode, regions = region.stat().st_ino, sorted(tiers.SHM.glob("vllm_offload_*.mmap"))
    native.kill_and_restart(1)
    assert region.stat().st_ino == inode, "the restarted engine made a new region instead of reopening it"
    assert sorted(tiers.SHM.glob("vllm_offload_*.mmap")) == regions, "a region was added or lost"
    again = tiers.ask(native, 1, crossed["prompt"], "after the restart (replica 1)")
    assert again.hit_tokens == crossed["tokens"] // 256 * 256 and again.text == crossed["cold"].text
