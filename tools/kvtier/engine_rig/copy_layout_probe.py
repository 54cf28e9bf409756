"""Checks lmcache-cpu-copy against the pinned vLLM's own CPU cache-write kernel. Runs in the engine venv:

    .venv-engine/bin/python tools/kvtier/engine_rig/copy_layout_probe.py DTYPE

vLLM's `cpu_attn_reshape_and_cache` (the kernel its CPU attention uses to store keys and values) writes
known K/V for scattered slots into a paged cache laid out as vLLM allocates it; the adapter's from_gpu must
read exactly those values back in LMCache's KV_2LTD order, and its to_gpu must put them back where vLLM's
attention reads them. Prints one JSON line; exits 1 on any mismatch.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import torch
from lmcache.v1.memory_management import MemoryFormat
from lmcache_cpu_copy.connector import CPUPagedKVConnector
from vllm import _custom_ops as ops
from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

LAYERS, KV_HEADS, HEAD_SIZE, BLOCK_SIZE, BLOCKS = 3, 2, 64, 128, 6


def main(dtype_name: str) -> int:
    dtype = getattr(torch, dtype_name)
    torch.manual_seed(0)
    isa = _get_attn_isa(dtype, BLOCK_SIZE, HEAD_SIZE)
    caches = [torch.zeros(BLOCKS, KV_HEADS, BLOCK_SIZE, 2 * HEAD_SIZE, dtype=dtype) for _ in range(LAYERS)]
    tokens = 200
    # Scattered, non-contiguous slots across blocks, as a real block table gives.
    slots = torch.randperm(BLOCKS * BLOCK_SIZE)[:tokens].to(torch.long)
    keys = [torch.randn(tokens, KV_HEADS, HEAD_SIZE).to(dtype) for _ in range(LAYERS)]
    values = [torch.randn(tokens, KV_HEADS, HEAD_SIZE).to(dtype) for _ in range(LAYERS)]
    for layer in range(LAYERS):
        view = caches[layer].view(BLOCKS, KV_HEADS, 2 * BLOCK_SIZE, HEAD_SIZE)
        key_cache, value_cache = view.chunk(2, dim=2)
        ops.cpu_attn_reshape_and_cache(keys[layer], values[layer], key_cache, value_cache, slots, isa)

    connector = CPUPagedKVConnector(LAYERS, KV_HEADS, HEAD_SIZE)
    buffer = torch.zeros(connector.get_shape(tokens), dtype=dtype)
    memory_obj = SimpleNamespace(tensor=buffer, metadata=SimpleNamespace(fmt=MemoryFormat.UNDEFINED))
    connector.from_gpu(memory_obj, 0, tokens, kvcaches=caches, slot_mapping=slots)
    read_ok = all(
        torch.equal(buffer[0, layer], keys[layer].reshape(tokens, -1))
        and torch.equal(buffer[1, layer], values[layer].reshape(tokens, -1))
        for layer in range(LAYERS)
    )

    # Back into an empty cache: must equal what vLLM's kernel wrote, byte for byte.
    restored = [torch.zeros_like(c) for c in caches]
    connector.to_gpu(memory_obj, 0, tokens, kvcaches=restored, slot_mapping=slots)
    write_ok = all(torch.equal(a, b) for a, b in zip(restored, caches, strict=True))
    print(json.dumps({"isa": isa, "dtype": dtype_name, "read_ok": read_ok, "write_ok": write_ok}))
    return 0 if read_ok and write_ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "float32"))
