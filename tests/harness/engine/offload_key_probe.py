"""Where vLLM's native fs tier puts a prompt's chunks, computed by the pinned vLLM's own code for one engine
pod's settings. Runs in the engine venv, in its own process per pod (PYTHONHASHSEED is read as in a pod):

    .venv-engine/bin/python tests/harness/engine/offload_key_probe.py CASES.json

CASES: a JSON list; each case {"transfer": the --kv-transfer-config JSON, "model_arg", "served_model_name",
"revision", "dtype", "block_size" (the engine's KV block size), "layers", "kv_heads", "tensor_parallel",
"hash_algorithm" (--prefix-caching-hash-algo), "tokens": [...]}. For each: vLLM's KVTransferConfig,
ParallelConfig and CacheConfig from the case, build_offloading_config on a stand-in KV cache of the case's
shape (offload_stand_in.py), the spec from OffloadingSpecFactory, and each `fs` tier from
SecondaryTierFactory.create_secondary_tier exactly as TieringOffloadingSpec builds it (it writes its
config.json under root_dir). The prompt's block hashes come from vLLM's hash_block_tokens chained from
NONE_HASH (init_none_hash with the case's hash function), and a chunk's file from the tier's own FileMapper
for the key the offloading scheduler makes (make_offload_key of the chunk's last block hash). Prints one
JSON line per case: {"files": [paths of the whole chunks' files], "config_fields": [the digest's field
names], "error"}.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

from product_probes import load  # this folder is first on sys.path: the probe runs by path
from vllm.config import CacheConfig, KVTransferConfig, ParallelConfig
from vllm.utils.hashing import get_hash_fn_by_name
from vllm.v1.core import kv_cache_utils
from vllm.v1.kv_offload.base import make_offload_key
from vllm.v1.kv_offload.factory import OffloadingSpecFactory
from vllm.v1.kv_offload.tiering.factory import SecondaryTierFactory

offloading_config = load("offload_stand_in").offloading_config
# The engine pods import the chart's sealed fs tier (cache.l2.integrity) from the podscripts ConfigMap.
sys.path.append(str(Path(__file__).resolve().parents[3] / "charts/kv-tiered-inference/files/podscripts"))


def files_of(case: dict[str, Any]) -> dict[str, Any]:
    transfer = KVTransferConfig(**json.loads(case["transfer"]))
    parallel = ParallelConfig(tensor_parallel_size=int(case["tensor_parallel"]))
    config = offloading_config(
        transfer,
        case["model_arg"],
        case["dtype"],
        int(case["block_size"]),
        parallel,
        CacheConfig(),
        layers=int(case["layers"]),
        kv_heads=int(case["kv_heads"]),
        served_model_name=case["served_model_name"],
        revision=case["revision"],
    )
    spec = OffloadingSpecFactory.create_spec(config)
    chunk_tokens = spec.blocks_per_chunk * config.cache.tokens_per_hash
    view = memoryview(bytearray(4 * 4096)).cast("B", (4, 4096))  # the CPU tier's rows (only strides read)
    tiers = [
        SecondaryTierFactory.create_secondary_tier(dict(tier), view, spec)
        for tier in spec.secondary_tier_configs
        if "root_dir" in tier  # vLLM's `fs` tier, or the chart's sealed one built on it (same file names)
    ]
    try:
        hash_fn = get_hash_fn_by_name(case["hash_algorithm"])
        kv_cache_utils.init_none_hash(hash_fn)
        per_block = config.cache.tokens_per_hash
        tokens = case["tokens"]
        hashes: list[bytes] = []
        parent = None
        for start in range(0, len(tokens) - per_block + 1, per_block):
            parent = kv_cache_utils.hash_block_tokens(hash_fn, parent, tokens[start : start + per_block])
            hashes.append(parent)
        per_chunk = chunk_tokens // per_block
        keys = [make_offload_key(hashes[i], 0) for i in range(per_chunk - 1, len(hashes), per_chunk)]
        files = [tier.file_mapper.get_file_name(key) for tier in tiers for key in keys]
        fields = sorted(tiers[0].file_mapper.get_run_config()) if tiers else []
    finally:
        for tier in tiers:
            tier.shutdown()
    return {"files": files, "config_fields": fields, "error": None}


def main(path: Path) -> None:
    for case in json.loads(path.read_text()):
        try:
            verdict = files_of(case)
        except Exception:  # the verdict is the output
            verdict = {"files": [], "config_fields": [], "error": traceback.format_exc(limit=3)}
        print(json.dumps(verdict), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
