"""The cross-pod invariants of the vllm-native backend, measured on vLLM's own code instead of assumed.

An engine pod is configured from what the chart renders for values/cpu.yaml with `cache.backend: vllm-native`
(native_keys.pod_case); vLLM's config builder, offloading spec, fs tier and block hash say where that pod
writes each chunk of a prompt (tests/harness/engine/offload_key_probe.py, one process per PYTHONHASHSEED).
Pods that differ in exactly one setting must look in other files for every KEYED setting of
upstream/vllm_offload.py and in the same files for every NOT_KEYED one, and the two lists together must be
exactly the settings tried here. test_native_tiers.py checks the probe's answer against the files a running
engine writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.engine import invariants, native_keys
from kvtier.engine_rig import rendered, tiers
from kvtier.upstream import vllm_offload

TINY = {"layers": 2, "kv_heads": 4}
TOKENS = invariants.prompt_tokens(600)  # two whole chunks of 256
# The digest's fields at the pinned vLLM (file_mapper.py): neither weights nor a version is among them.
DIGEST_FIELDS = {
    "blocks_per_file",
    "dcp_size",
    "dtype",
    "inference_engine",
    "kv_cache_groups",
    "model_name",
    "pcp_size",
    "pp_size",
    "tokens_per_hash",
    "tp_size",
}


def _transfer(pod: native_keys.NativePod, **changes: Any) -> str:
    """The pod's --kv-transfer-config with keys of its extra config (or its first tier's) changed."""
    transfer = json.loads(pod.case["transfer"])
    extra = transfer["kv_connector_extra_config"]
    for key, value in changes.items():
        if key in ("root_dir", "n_read_threads", "n_write_threads"):
            extra["secondary_tiers"][0][key] = value
        else:
            extra[key] = value
    return json.dumps(transfer)


@pytest.fixture(scope="module")
def verdicts(work: Path) -> dict[str, dict[str, Any]]:
    overlay = tiers.rig_overlay(256, tiers.NATIVE)
    engine = rendered.render_engine([tiers.CPU_VALUES], overlay, work / "render")
    pod = native_keys.pod_case(engine, work / "l2", work / "pod", TINY)
    base = {**pod.case, "tokens": TOKENS}
    other_root = str(pod.l2_dir) + "-other"
    lookups = {
        "same pod": {},
        "model argument": {"model_arg": base["model_arg"] + "-v2"},
        "KV dtype": {"dtype": "bfloat16" if base["dtype"] != "bfloat16" else "float16"},
        "chunk size": {"transfer": _transfer(pod, block_size=512)},
        "engine block size": {"block_size": base["block_size"] * 2},
        "layers": {"layers": TINY["layers"] + 1},
        "prefix hash": {"hash_algorithm": "sha256_cbor"},
        "L2 directory": {"transfer": _transfer(pod, root_dir=other_root)},
        "weights": {"revision": "another-revision"},
        "tensor parallel size": {"tensor_parallel": 2},
        "served model name": {"served_model_name": "another-name"},
        "CPU tier size": {"transfer": _transfer(pod, cpu_bytes_to_use=3 << 30)},
        "I/O threads": {"transfer": _transfer(pod, n_read_threads=2, n_write_threads=3)},
    }
    names = list(lookups)
    found = native_keys.run_cases([{**base, **lookups[n]} for n in names], pod.seed, work)
    found += native_keys.run_cases([base], str(int(pod.seed) + 1), work)
    return dict(zip([*names, "hash seed"], found, strict=True))


def test_every_case_ran(verdicts: dict[str, dict[str, Any]]) -> None:
    failed = {name: v["error"] for name, v in verdicts.items() if v["error"]}
    assert not failed, failed


def test_a_pod_writes_one_file_per_whole_chunk_in_its_namespace(verdicts: dict[str, dict[str, Any]]) -> None:
    same = verdicts["same pod"]["files"]
    assert len(same) == len(TOKENS) // 256 == len(set(same))
    for path in same:
        assert "/tiny-llama." in path and path.endswith(".bin"), path  # under the chart's namespace


def test_vllm_keys_on_exactly_what_the_bundle_says(verdicts: dict[str, dict[str, Any]]) -> None:
    tried = set(verdicts) - {"same pod", "vLLM version"}
    table = set(vllm_offload.KEYED) | set(vllm_offload.NOT_KEYED)
    assert tried | {"vLLM version"} == table, "the table and the test drifted"
    same = set(verdicts["same pod"]["files"])
    moved = {name for name in tried if not same & set(verdicts[name]["files"])}
    kept = {name for name in tried if set(verdicts[name]["files"]) == same}
    assert moved == set(vllm_offload.KEYED), {n: verdicts[n]["files"][:1] for n in tried}
    assert kept == set(vllm_offload.NOT_KEYED) - {"vLLM version"}


def test_neither_weights_nor_the_vllm_version_are_in_the_directory_digest(
    verdicts: dict[str, dict[str, Any]],
) -> None:
    """Why the chart's namespace adds the revision, the weights' source and cache.vllmVersion: vLLM's
    digest has none of them, and its files carry no format version (the "vLLM version" entry)."""
    assert set(verdicts["same pod"]["config_fields"]) == DIGEST_FIELDS
