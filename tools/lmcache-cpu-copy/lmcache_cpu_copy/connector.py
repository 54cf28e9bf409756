"""The copy LMCache lacks on CPU: vLLM's paged KV <-> LMCache's KV_2LTD memory objects, in plain torch.

A memory object of the KV_2LTD format is [2 (K, V), num_layers, num_tokens, num_kv_heads * head_size],
the layout LMCache's CUDA connector (VLLMPagedMemGPUConnectorV2) produces, so chunk files written here
have the shape and byte order of files written on a GPU for the same model.
"""

from __future__ import annotations

from typing import Any

import torch
from lmcache.v1.gpu_connector.gpu_connectors import GPUConnectorInterface
from lmcache.v1.memory_management import MemoryFormat, MemoryObj
from lmcache.v1.metadata import LMCacheMetadata

from lmcache_cpu_copy import layout


class CPUPagedKVConnector(GPUConnectorInterface):
    def __init__(self, num_layers: int, num_kv_heads: int, head_size: int) -> None:
        self.num_layers = num_layers
        self.num_kv_heads = num_kv_heads
        self.head_size = head_size
        self.kvcaches: list[torch.Tensor] | None = None
        self.isa: str | None = None  # vLLM's attention ISA, read once from the first cache seen

    @classmethod
    def from_metadata(cls, metadata: LMCacheMetadata, *_args: Any, **_kwargs: Any) -> CPUPagedKVConnector:
        if metadata.use_mla:
            raise layout.LayoutError("lmcache-cpu-copy has no MLA layout; use a standard-attention model")
        # kv_shape: (num_layers, 2, chunk_size, num_kv_heads, head_size)
        num_layers, _, _, num_kv_heads, head_size = metadata.kv_shape
        return cls(num_layers, num_kv_heads, head_size)

    def get_shape(self, num_tokens: int) -> torch.Size:
        return torch.Size([2, self.num_layers, num_tokens, self.num_kv_heads * self.head_size])

    def _block_size(self) -> int:
        assert self.kvcaches is not None
        return int(self.kvcaches[0].shape[2])

    def _layers(self, kwargs: dict[str, Any]) -> list[tuple[layout.Half, layout.Half]]:
        if "kvcaches" in kwargs:
            self.kvcaches = list(kwargs["kvcaches"])
        if self.kvcaches is None:
            raise ValueError("LMCache passed no kvcaches to the CPU copy")
        if len(self.kvcaches) != self.num_layers:
            raise layout.LayoutError(
                f"{len(self.kvcaches)} KV layers, LMCache metadata says {self.num_layers}"
            )
        if self.isa is None:
            first = self.kvcaches[0]
            self.isa = layout.attention_isa(first.dtype, first.shape[2], self.head_size)
        return [layout.split_layer(kv, self.num_kv_heads, self.head_size, self.isa) for kv in self.kvcaches]

    def from_gpu(self, memory_obj: MemoryObj, start: int, end: int, **kwargs: Any) -> None:
        """Paged KV of tokens [start, end) -> the memory object."""
        assert memory_obj.tensor is not None
        layers = self._layers(kwargs)
        blocks, positions = layout.block_and_position(kwargs["slot_mapping"][start:end], self._block_size())
        out = memory_obj.tensor
        tokens = end - start
        for index, (keys, values) in enumerate(layers):
            out[0, index, :tokens].copy_(keys.read(blocks, positions))
            out[1, index, :tokens].copy_(values.read(blocks, positions))
        memory_obj.metadata.fmt = MemoryFormat.KV_2LTD

    def to_gpu(self, memory_obj: MemoryObj, start: int, end: int, **kwargs: Any) -> None:
        """The memory object -> paged KV of tokens [start, end), leaving tokens vLLM already holds."""
        assert memory_obj.tensor is not None
        if memory_obj.metadata.fmt != MemoryFormat.KV_2LTD:
            raise ValueError(f"lmcache-cpu-copy loads KV_2LTD memory objects, got {memory_obj.metadata.fmt}")
        layers = self._layers(kwargs)
        # Same rule as LMCache's CUDA connector: tokens vLLM's own prefix cache holds are not rewritten.
        skip = min(end - start, max(0, int(kwargs.get("vllm_cached_tokens", 0)) - start))
        slots = kwargs["slot_mapping"][start + skip : end]
        blocks, positions = layout.block_and_position(slots, self._block_size())
        source = memory_obj.tensor[:, :, skip : end - start]
        for index, (keys, values) in enumerate(layers):
            keys.write(blocks, positions, source[0, index])
            values.write(blocks, positions, source[1, index])

    def batched_from_gpu(self, memory_objs, starts, ends, **kwargs):  # type: ignore[no-untyped-def]
        for memory_obj, start, end in zip(memory_objs, starts, ends, strict=True):
            self.from_gpu(memory_obj, start, end, **kwargs)

    def batched_to_gpu(self, memory_objs=None, starts=None, ends=None, **kwargs):  # type: ignore[no-untyped-def]
        for memory_obj, start, end in zip(memory_objs or [], starts or [], ends or [], strict=True):
            self.to_gpu(memory_obj, start, end, **kwargs)
