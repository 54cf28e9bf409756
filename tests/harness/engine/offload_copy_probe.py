"""Checks the offload-cpu-copy stand-in against the pinned vLLM's own pointer arithmetic for its offloading
copies. Runs in the engine venv:

    .venv-engine/bin/python tests/harness/engine/offload_copy_probe.py

vLLM's CUDA worker turns a transfer into copy descriptors (source address, destination address, bytes) with
`SingleDirectionOffloadingHandler._fill_direct_ops` and `compute_sub_block_ptrs`
(vllm/v1/kv_offload/cpu/gpu_worker.py), then hands them to a CUDA kernel. Here those two functions build the
descriptors for CPU tensors (the per-group loop of `transfer_async` around them is restated: its skip counts
and chunk counts) and ctypes.memmove carries them out, which is the reference. The stand-in's CPUCopyWorker
does the same transfer, store and load, on its own copy of the tensors. Two KV cache groups, padded pages,
a first block in the middle of its chunk, and scattered block and chunk ids: any difference in layout shows.
It also asks vLLM's own CPUOffloadingSpec for its worker twice on this CPU platform: as vLLM ships it (the
device refusal, "refusal") and after the stand-in's plugin entry point has run ("patched_worker", the class
it then builds). Prints one JSON line: {"store_ok", "load_ok", "bytes", "refusal", "patched_worker"}.
"""

from __future__ import annotations

import ctypes
import json
import os
from types import SimpleNamespace
from typing import Any

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

import numpy as np
import torch
from offload_cpu_copy.worker import CPUCopyWorker
from vllm.v1.kv_offload.base import (
    CanonicalKVCacheRef,
    CanonicalKVCaches,
    CanonicalKVCacheTensor,
    GPULoadStoreSpec,
)
from vllm.v1.kv_offload.cpu.common import CPULoadStoreSpec
from vllm.v1.kv_offload.cpu.gpu_worker import SingleDirectionOffloadingHandler

BLOCKS_PER_CHUNK = 4
ENGINE_BLOCKS, CHUNKS = 40, 12
PAGES = (4096, 4096, 2048)  # bytes per block of each engine tensor (the last two layers' groups differ)
# Group 0 reads tensors 0 and 1 (tensor 1 only its first 3000 bytes: a padded page); group 1 tensor 2.
REFS = [[(0, 4096), (1, 3000)], [(2, 2048)]]
GROUP_SIZES, BLOCK_INDICES = (5, 3), (3, 6)  # group 0 starts 3 blocks into its chunk, group 1 two blocks in


def transfer() -> tuple[GPULoadStoreSpec, CPULoadStoreSpec]:
    rng = np.random.default_rng(7)
    blocks = rng.permutation(ENGINE_BLOCKS)[: sum(GROUP_SIZES)].tolist()
    chunks_needed = sum(
        -(-(size + index % BLOCKS_PER_CHUNK) // BLOCKS_PER_CHUNK)
        for size, index in zip(GROUP_SIZES, BLOCK_INDICES, strict=True)
    )
    chunks = rng.permutation(CHUNKS)[:chunks_needed].tolist()
    return GPULoadStoreSpec(blocks, GROUP_SIZES, BLOCK_INDICES), CPULoadStoreSpec(chunks)


def engine_tensors(fill: bool) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    return [
        torch.randint(-128, 127, (ENGINE_BLOCKS, page), dtype=torch.int8, generator=generator)
        if fill
        else torch.zeros((ENGINE_BLOCKS, page), dtype=torch.int8)
        for page in PAGES
    ]


def chunk_tensors() -> list[torch.Tensor]:
    return [torch.zeros((CHUNKS, page * BLOCKS_PER_CHUNK), dtype=torch.int8) for page in PAGES]


def refs() -> list[list[CanonicalKVCacheRef]]:
    return [[CanonicalKVCacheRef(tensor_idx=t, page_size_bytes=n) for t, n in group] for group in REFS]


def vllm_copy(engine: list[torch.Tensor], chunks: list[torch.Tensor], to_chunks: bool) -> int:
    """The reference: vLLM's descriptors for the transfer, carried out with memmove. Returns bytes copied."""
    gpu_spec, cpu_spec = transfer()
    handler: Any = SimpleNamespace(
        src_tensors=engine if to_chunks else chunks,
        dst_tensors=chunks if to_chunks else engine,
        src_blocks_per_chunk=1 if to_chunks else BLOCKS_PER_CHUNK,
        dst_blocks_per_chunk=BLOCKS_PER_CHUNK if to_chunks else 1,
        layer_refs_per_group=refs(),
    )
    src_blocks = gpu_spec.block_ids if to_chunks else cpu_spec.block_ids
    dst_blocks = cpu_spec.block_ids if to_chunks else gpu_spec.block_ids
    ops = sum(size * len(group) for size, group in zip(GROUP_SIZES, REFS, strict=True))
    all_src, all_dst = np.zeros(ops, dtype=np.int64), np.zeros(ops, dtype=np.int64)
    all_sizes = np.zeros(ops, dtype=np.int64)
    src_at = dst_at = op = total = 0
    for group, (size, index) in enumerate(zip(GROUP_SIZES, BLOCK_INDICES, strict=True)):
        src_skip = index % handler.src_blocks_per_chunk
        dst_skip = index % handler.dst_blocks_per_chunk
        src_count = -(-(size + src_skip) // handler.src_blocks_per_chunk)
        dst_count = -(-(size + dst_skip) // handler.dst_blocks_per_chunk)
        op, moved = SingleDirectionOffloadingHandler._fill_direct_ops(
            handler,
            group,
            src_blocks[src_at : src_at + src_count],
            dst_blocks[dst_at : dst_at + dst_count],
            size,
            src_skip,
            dst_skip,
            all_src,
            all_dst,
            all_sizes,
            op,
        )
        total += moved
        src_at, dst_at = src_at + src_count, dst_at + dst_count
    for src, dst, length in zip(all_src[:op], all_dst[:op], all_sizes[:op], strict=True):
        ctypes.memmove(int(dst), int(src), int(length))
    return total


def stand_in_copy(engine: list[torch.Tensor], to_chunks: bool, rows: list[torch.Tensor]) -> CPUCopyWorker:
    caches = CanonicalKVCaches(
        tensors=[CanonicalKVCacheTensor(t, page) for t, page in zip(engine, PAGES, strict=True)],
        group_data_refs=refs(),
    )
    worker = CPUCopyWorker(caches, BLOCKS_PER_CHUNK, CHUNKS)
    for mine, given in zip(worker.chunk_rows, rows, strict=True):
        mine.copy_(given)
    gpu_spec, cpu_spec = transfer()
    if to_chunks:
        worker.submit_store(1, gpu_spec, cpu_spec)
    else:
        worker.submit_load(1, cpu_spec, gpu_spec)
    return worker


def spec_worker() -> str:
    """The worker class vLLM's CPUOffloadingSpec builds for a small KV cache, or its refusal as text."""
    from vllm.v1.kv_offload.config import (
        OffloadingCacheConfig,
        OffloadingConfig,
        OffloadingGroupConfig,
        OffloadingModelConfig,
        OffloadingParallelConfig,
    )
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory

    config = OffloadingConfig(
        groups=(OffloadingGroupConfig(16, ("layer.0",), 0),),
        worker_kv_bytes_per_block=PAGES[0],
        enable_kv_cache_events=False,
        extra_config={"spec_name": "CPUOffloadingSpec", "cpu_bytes_to_use": 1 << 20, "block_size": 64},
        engine_id="offload-copy-probe",
        model=OffloadingModelConfig("probe", "float16"),
        cache=OffloadingCacheConfig(tokens_per_hash=16, blocks_per_chunk=BLOCKS_PER_CHUNK),
        parallel=OffloadingParallelConfig(0, 1, 1, 1, 1, 1, 0, 1, None, True),
    )
    caches = CanonicalKVCaches(
        tensors=[CanonicalKVCacheTensor(engine_tensors(fill=False)[0], PAGES[0])],
        group_data_refs=[[CanonicalKVCacheRef(tensor_idx=0, page_size_bytes=PAGES[0])]],
    )
    try:
        worker = OffloadingSpecFactory.create_spec(config).get_worker(caches)
    except Exception as refusal:
        return f"{type(refusal).__name__}: {refusal}"
    return type(worker).__name__


def main() -> None:
    refusal = spec_worker()  # vLLM as shipped: the stand-in's plugin has not run in this process
    import offload_cpu_copy

    offload_cpu_copy.register()  # what vLLM does with every vllm.general_plugins entry point at start
    patched_worker = spec_worker()

    source = engine_tensors(fill=True)
    reference_rows = chunk_tensors()
    moved = vllm_copy([t.clone() for t in source], reference_rows, to_chunks=True)
    worker = stand_in_copy([t.clone() for t in source], to_chunks=True, rows=chunk_tensors())
    store_ok = all(torch.equal(a, b) for a, b in zip(worker.chunk_rows, reference_rows, strict=True))
    [result] = worker.get_finished()
    store_ok = store_ok and result.transfer_size == moved and any(bool(r.any()) for r in reference_rows)

    reference_engine = engine_tensors(fill=False)
    vllm_copy(reference_engine, [r.clone() for r in reference_rows], to_chunks=False)
    loaded = engine_tensors(fill=False)
    stand_in_copy(loaded, to_chunks=False, rows=[r.clone() for r in reference_rows])
    load_ok = all(torch.equal(a, b) for a, b in zip(loaded, reference_engine, strict=True))
    load_ok = load_ok and any(bool(t.any()) for t in reference_engine)
    verdict = {"store_ok": store_ok, "load_ok": load_ok, "bytes": moved}
    print(json.dumps(verdict | {"refusal": refusal, "patched_worker": patched_worker}))


if __name__ == "__main__":
    main()
