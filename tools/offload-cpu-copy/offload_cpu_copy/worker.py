"""The copy vLLM's native offloading lacks on CPU: engine KV blocks <-> chunks of the CPU tier, in torch.

vLLM hands the worker its KV cache as tensors of one row per engine block (`page_size_bytes` wide) and the
CPU tier as rows of one chunk each, `blocks_per_chunk` engine pages side by side. A transfer names engine
blocks (grouped per KV cache group, each group a run of logically consecutive blocks starting at
`block_indices[group]`) and the chunks that hold them; the first block of a group may sit in the middle of
its chunk. Per layer only the unpadded page (`CanonicalKVCacheRef.page_size_bytes`) is copied, as vLLM's
CUDA path does, so chunk bytes here are laid out exactly as they are on a GPU for the same engine layout.
Copies are synchronous: a job is finished when its submit call returns.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from vllm.v1.kv_offload.base import (
    BlockIDsLoadStoreSpec,
    CanonicalKVCaches,
    GPULoadStoreSpec,
    OffloadingWorker,
    TransferResult,
)


class LayoutError(RuntimeError):
    """The offloading spec asked for something this stand-in does not implement."""


class CPUCopyWorker(OffloadingWorker):
    """Same constructor as vLLM's CPUOffloadingWorker (the spec builds it in that one's place)."""

    def __init__(
        self,
        kv_caches: CanonicalKVCaches,
        blocks_per_chunk: int,
        num_cpu_chunks: int,
        mmap_region: Any = None,
        canonical_layout: bool = False,
    ) -> None:
        if canonical_layout:
            raise LayoutError("offload-cpu-copy copies the direct layout only; drop canonical_layout")
        self.blocks_per_chunk = blocks_per_chunk
        self.refs = kv_caches.group_data_refs
        self.mmap_region = mmap_region
        self.engine_pages: list[torch.Tensor] = []  # per tensor: [engine blocks, page bytes]
        self.chunk_rows: list[torch.Tensor] = []  # per tensor: [chunks, blocks_per_chunk * page bytes]
        for entry in kv_caches.tensors:
            page = entry.page_size_bytes
            self.engine_pages.append(entry.tensor.view(torch.int8).view(-1, page))
            row = page * blocks_per_chunk
            if mmap_region is not None:
                self.chunk_rows.append(mmap_region.create_next_worker_view(row))
            else:
                self.chunk_rows.append(torch.zeros((num_cpu_chunks, row), dtype=torch.int8))
        self.finished: list[TransferResult] = []

    def submit_store(self, job_id: int, src_spec: GPULoadStoreSpec, dst_spec: Any) -> bool:
        self._transfer(job_id, src_spec, dst_spec, to_chunks=True)
        return True

    def submit_load(self, job_id: int, src_spec: Any, dst_spec: GPULoadStoreSpec) -> bool:
        self._transfer(job_id, dst_spec, src_spec, to_chunks=False)
        return True

    def _transfer(
        self, job_id: int, engine: GPULoadStoreSpec, chunks: BlockIDsLoadStoreSpec, to_chunks: bool
    ) -> None:
        started = time.perf_counter()
        per_chunk = self.blocks_per_chunk
        sizes = list(engine.group_sizes)
        firsts = list(engine.block_indices)
        if len(sizes) != len(self.refs) or len(firsts) != len(self.refs):
            raise LayoutError(f"{len(sizes)} block groups in the transfer, {len(self.refs)} KV cache groups")
        moved = 0
        engine_at = chunk_at = 0
        for group, (count, first) in enumerate(zip(sizes, firsts, strict=True)):
            if count == 0:
                continue
            offset = int(first) % per_chunk  # where the group's first block sits in its chunk
            used_chunks = -(-(count + offset) // per_chunk)
            engine_blocks = engine.block_ids[engine_at : engine_at + count]
            chunk_ids = chunks.block_ids[chunk_at : chunk_at + used_chunks]
            for index, block in enumerate(engine_blocks):
                slot = offset + index
                row = int(chunk_ids[slot // per_chunk])
                for ref in self.refs[group]:
                    pages = self.engine_pages[ref.tensor_idx]
                    start = (slot % per_chunk) * pages.shape[1]
                    in_engine = pages[int(block), : ref.page_size_bytes]
                    in_chunk = self.chunk_rows[ref.tensor_idx][row, start : start + ref.page_size_bytes]
                    (in_chunk if to_chunks else in_engine).copy_(in_engine if to_chunks else in_chunk)
                    moved += ref.page_size_bytes
            engine_at += count
            chunk_at += used_chunks
        if engine_at != len(engine.block_ids) or chunk_at != len(chunks.block_ids):
            raise LayoutError(
                f"transfer names {len(engine.block_ids)} engine blocks and {len(chunks.block_ids)} chunks, "
                f"its groups cover {engine_at} and {chunk_at}"
            )
        self.finished.append(TransferResult(job_id, True, moved, time.perf_counter() - started))

    def get_finished(self) -> list[TransferResult]:
        done, self.finished = self.finished, []
        return done

    def wait(self, job_ids: set[int]) -> None:
        return  # every copy completed inside its submit call

    def shutdown(self) -> None:
        self.engine_pages.clear()
        self.chunk_rows.clear()
        if self.mmap_region is not None:
            self.mmap_region.cleanup()
            self.mmap_region = None
