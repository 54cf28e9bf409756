"""The cross-pod invariants, measured on LMCache's real storage path instead of assumed.

Engine pods are configured from what the chart renders for values/cpu.yaml (LMCache file, PYTHONHASHSEED,
model argument, TP, dtype: harness.engine.invariants); each runs LMCache's own engine, L1 and fs connector in
its own process (tests/harness/engine/lmcache_probe.py). One pod stores a prompt's chunks; pods that differ
from it in exactly one setting look them up. Every KEYED setting of upstream/lmcache_key.py must miss, every
NOT_KEYED one must hit, and the two lists together must be exactly the settings tried here."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from harness.engine import invariants
from kvtier.engine_rig import rendered, tiers
from kvtier.podscripts import l2_integrity
from kvtier.upstream import lmcache_key

TINY = {"layers": 2, "kv_heads": 2, "head_size": 64}
QWEN2_7B = {"layers": 28, "kv_heads": 4, "head_size": 128}  # Qwen2-7B's KV shape (synthetic tensors)
TOKENS = invariants.prompt_tokens(600)  # two whole chunks of 256


def render_pod(work: Path, overlay: dict[str, Any], name: str, shape: dict[str, int]) -> invariants.Pod:
    engine = rendered.render_engine([tiers.CPU_VALUES], overlay, work / name)
    return invariants.pod_case(engine, work / "l2", work / name, shape)


@pytest.fixture(scope="module")
def verdicts(work: Path) -> dict[str, dict[str, Any]]:
    # values/cpu.yaml as a user installs it, but for cache.l2.integrity: LMCache's own fs connector through
    # remote_url, whose URL variants are tried below. The chart's L2 plugin is that connector with the same
    # keys and file names (test_l2_tiers.py reads its files back by the key in their names).
    pod = render_pod(work, {"cache": {"l2": {"integrity": False}}}, "base", TINY)
    base = {**pod.case, "tokens": TOKENS, "kv_seed": 1}
    (work / "alias").symlink_to(work / "l2")  # the same volume reached through another mount path
    url = f"fs://localhost:0{pod.l2_dir}/"

    def config(name: str, **changes: Any) -> dict[str, str]:
        return {"config": invariants.variant_config(pod, work, name, **changes)}

    alias = url.replace(str(work / "l2"), str(work / "alias"))
    lookups = {
        "same pod": {},
        "model argument": {"model_arg": base["model_arg"] + "-v2"},
        "world size": {"world_size": 2},
        "worker id": {"worker_id": 1},  # the key's rank field alone (a TP=1 pod has rank 0 only)
        "KV dtype": {"dtype": "float32"},
        "chunk size": config("chunk", chunk_size=128),
        "prefix hash": config("hash", pre_caching_hash_algorithm="sha256"),
        "L2 directory": config("dir", remote_url=url[:-1] + "-other/"),
        "serde": config("serde", remote_serde="kivi"),
        "served model name": {"served_model_name": "another-name"},
        "URL host and port": config("url", remote_url=url.replace("localhost:0", "127.0.0.1:9")),
        "mount path": config("mount", remote_url=alias),
    }
    stored = invariants.run_cases([{**base, "action": "store"}], pod.seed, work)
    assert stored[0]["stored_files"] == 2, stored
    names = list(lookups)
    found = invariants.run_cases([{**base, **lookups[n], "action": "lookup"} for n in names], pod.seed, work)
    other_seed = str(int(pod.seed) + 1)
    found += invariants.run_cases([{**base, "action": "lookup"}], other_seed, work)
    return dict(zip([*names, "hash seed"], found, strict=True))


def test_an_identical_pod_hits_every_whole_chunk_with_the_same_bytes(
    verdicts: dict[str, dict[str, Any]],
) -> None:
    same = verdicts["same pod"]
    assert same["error"] is None and same["hit_tokens"] == 512 and same["data_ok"] is True, same


def test_lmcache_keys_on_exactly_what_the_bundle_says(verdicts: dict[str, dict[str, Any]]) -> None:
    tried = set(verdicts) - {"same pod"}
    assert tried == set(lmcache_key.KEYED) | set(lmcache_key.NOT_KEYED), "the table and the test drifted"
    missed = {name for name in tried if verdicts[name]["hit_tokens"] == 0}
    hit = {name for name in tried if verdicts[name]["hit_tokens"] == 512}
    assert missed == set(lmcache_key.KEYED), {n: verdicts[n]["hit_tokens"] for n in tried}
    assert hit == set(lmcache_key.NOT_KEYED), {n: verdicts[n]["hit_tokens"] for n in tried}


def two_models_behind_one_argument(work: Path, folder: str) -> tuple[invariants.Pod, invariants.Pod]:
    """Two models of different shapes served as the same model argument (HyperPod mounts every model at one
    path; a new revision replaces weights in place): the chart renders each with its own namespace."""

    def model(name: str, claim: str) -> dict[str, Any]:
        source = {"pvc": {"claimName": claim, "path": "llm"}}
        return {"name": name, "model": "llm", "source": source, "replicas": 1, "dtype": "float32"}

    pods = []
    for name, claim, shape in (("small", "weights-small", TINY), ("big", "weights-big", QWEN2_7B)):
        overlay = {"models": [{**model(name, claim), "resources": {"limits": {"memory": "8Gi"}}}]}
        pods.append(render_pod(work / folder, overlay, name, shape))
    return pods[0], pods[1]


def test_two_models_behind_one_model_argument_never_read_each_others_chunks(work: Path) -> None:
    small, big = two_models_behind_one_argument(work, "namespaced")
    assert small.case["model_arg"] == big.case["model_arg"] == "/models/llm"
    assert small.l2_dir != big.l2_dir and small.l2_dir.parent == big.l2_dir.parent
    stored = invariants.run_cases(
        [{**big.case, "tokens": TOKENS, "kv_seed": 2, "action": "store"}], big.seed, work
    )
    assert stored[0]["stored_files"] == 2
    (found,) = invariants.run_cases(
        [{**small.case, "tokens": TOKENS, "kv_seed": 2, "action": "lookup"}], small.seed, work
    )
    assert found["hit_tokens"] == 0, found


def test_without_namespaces_the_other_models_kv_is_served(work: Path) -> None:
    """The hazard the namespaces remove, shown on LMCache itself: the same two pods pointed at one flat
    directory (the layout before namespaces) hit each other's chunks, and the read returns the other
    model's KV (wrongly shaped), which LMCache reports as a hit."""
    small, big = two_models_behind_one_argument(work, "flat")
    flat = f"fs://localhost:0{work / 'flat-l2'}/"
    big_case = {**big.case, "config": invariants.variant_config(big, work, "flat-big", remote_url=flat)}
    small_case = {
        **small.case,
        "config": invariants.variant_config(small, work, "flat-small", remote_url=flat),
    }
    invariants.run_cases([{**big_case, "tokens": TOKENS, "kv_seed": 2, "action": "store"}], big.seed, work)
    (found,) = invariants.run_cases(
        [{**small_case, "tokens": TOKENS, "kv_seed": 2, "action": "lookup"}], small.seed, work
    )
    assert found["hit_tokens"] == 512, "LMCache no longer confuses the models: the namespaces may be relaxed"
    print(f"flat layout, other model: {found}")
    assert found["data_ok"] is not True, found


def test_chunk_files_match_the_planner_for_a_qwen2_7b_shaped_kv(work: Path) -> None:
    from kvtier.plan import capacity

    qwen = {"name": "qwen", "model": "Qwen/Qwen2-7B-Instruct", "replicas": 1, "dtype": "float16"}
    qwen |= {"source": {"huggingface": {"revision": "main"}}, "resources": {"limits": {"memory": "8Gi"}}}
    pod = render_pod(work, {"models": [qwen]}, "qwen", QWEN2_7B)
    invariants.run_cases([{**pod.case, "tokens": TOKENS, "kv_seed": 3, "action": "store"}], pod.seed, work)
    files = sorted(pod.l2_dir.glob("*.data"))
    spec = capacity.known_model("Qwen/Qwen2-7B-Instruct")
    assert spec is not None and spec.kv_bytes_per_token(2) == 57_344  # ../shared/DESIGN.md section 4
    # The chart's default seals each file (cache.l2.integrity): LMCache's 28-byte header, the KV, the trailer.
    sealed = 57_344 * 256 + 28 + l2_integrity.TRAILER_BYTES
    assert capacity.chunk_file_bytes(capacity.Deployment(spec, 2, 2)) == sealed
    assert {os.path.getsize(f) for f in files} == {sealed}, "planner bytes x chunk + header + trailer"
