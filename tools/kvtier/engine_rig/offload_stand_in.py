"""vLLM's own OffloadingConfig for a rendered --kv-transfer-config, built without a model: the engine venv's
probes (vllm_args_probe.py, tests/harness/engine/offload_key_probe.py) import it by its file name.

`build_offloading_config` (vllm/distributed/kv_transfer/kv_connector/v1/offloading/config.py) reads a
VllmConfig and the engine's KVCacheConfig. Here both are stand-ins with only what it reads: a KV cache of
`layers` full-attention layers (vLLM's layer names), `kv_heads` KV heads split over the tensor-parallel
ranks, `head_size` dims, of `dtype`, in blocks of `block_size` tokens; the model's argument, dtype and
total KV heads; the real ParallelConfig and CacheConfig given. What vLLM derives from them (blocks per
chunk, tokens per hash, whether the layout is parallelism-agnostic) is vLLM's code, unchanged.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any


def offloading_config(
    transfer: Any,
    model: str,
    dtype: str,
    block_size: int,
    parallel: Any,
    cache: Any,
    layers: int = 2,
    kv_heads: int = 2,
    head_size: int = 64,
    **model_fields: Any,
) -> Any:
    """`model_fields`: more attributes of the model config (served_model_name, revision, ...), there for vLLM
    to read should it ever key on them."""
    import torch
    from vllm.distributed.kv_transfer.kv_connector.v1.offloading.config import build_offloading_config
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec

    per_rank = max(kv_heads // parallel.tensor_parallel_size, 1)
    spec = FullAttentionSpec(
        block_size=block_size, num_kv_heads=per_rank, head_size=head_size, dtype=getattr(torch, dtype)
    )
    names = [f"model.layers.{i}.self_attn.attn" for i in range(layers)]
    kv_cache = KVCacheConfig(
        num_blocks=64, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(names, spec)]
    )
    cache.block_size = block_size
    model_config = SimpleNamespace(
        model=model, dtype=dtype, use_mla=False, get_total_num_kv_heads=lambda: kv_heads, **model_fields
    )
    vllm_config = SimpleNamespace(
        kv_transfer_config=transfer,
        parallel_config=parallel,
        cache_config=cache,
        model_config=model_config,
        use_v2_model_runner=False,
        kv_events_config=None,
    )
    return build_offloading_config(vllm_config, kv_cache)
