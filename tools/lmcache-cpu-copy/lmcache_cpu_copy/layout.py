"""vLLM CPU's paged KV layout, as the pinned vLLM's cache-write kernel lays it out (measured, not documented).

One tensor per attention layer, shaped [num_blocks, num_kv_heads, block_size, 2 * head_size]. vLLM views it
as [num_blocks, num_kv_heads, 2 * block_size, head_size] and hands the kernel the two halves of each
(block, head) area: the first for the block's keys, the second for its values. What the kernel writes in
each half depends on the attention ISA vLLM picks for the CPU (p: position in the block, d: head dim;
B: block size, H: head size; offsets in elements from the half's start):
- `vec` and `vec16` (x86 without AMX, or a head size that is not a multiple of 32): keys transposed,
  offset d * B + p; values row by row, p * H + d.
- `amx` (bfloat16 caches with a block size that is a multiple of 32 on CPUs with AMX tiles): packed for
  the tile multiplies, pairs along each product's reduction dimension side by side. Keys (reduced over d)
  in groups of 16 positions: (p // 16) * 16 * H + (d // 2) * 32 + (p % 16) * 2 + d % 2. Values (reduced
  over p) in groups of 16 dims: (d // 16) * 16 * B + (p // 2) * 32 + (d % 16) * 2 + p % 2.
Other ISAs (`neon`, ...) are not known here and are refused. A token in slot s lives in block
s // block_size at position s % block_size. tests/engine/test_cpu_copy_adapter.py re-checks this against
the kernel itself, for the ISA vLLM picks on the machine that runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

KNOWN_ISAS = ("vec", "vec16", "amx")
Where = Callable[[torch.Tensor, torch.Tensor], tuple[Any, ...]]
ALL = slice(None)


class LayoutError(RuntimeError):
    """The engine's KV tensors are not the layout this stand-in was written for."""


@dataclass(frozen=True)
class Half:
    """One layer's keys or values: a view of the cache, and where a token's (block, position) is in it.

    Indexing the view at where(blocks, positions) gives [tokens, kv heads, *per_head], whose last dims hold
    one token's head dims in order."""

    view: torch.Tensor
    where: Where
    per_head: tuple[int, ...]

    def read(self, blocks: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """[tokens, kv heads * head size]"""
        return self.view[self.where(blocks, positions)].reshape(len(blocks), -1)

    def write(self, blocks: torch.Tensor, positions: torch.Tensor, data: torch.Tensor) -> None:
        """data: [tokens, kv heads * head size] (or any shape of those elements, in that order)."""
        shape = (len(blocks), self.view.shape[1], *self.per_head)
        self.view[self.where(blocks, positions)] = data.reshape(shape).to(self.view.dtype)


def attention_isa(dtype: torch.dtype, block_size: int, head_size: int) -> str:
    """The ISA vLLM's CPU attention uses for this cache (its own choice function)."""
    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

    return str(_get_attn_isa(dtype, block_size, head_size))


def split_layer(kv: torch.Tensor, num_kv_heads: int, head_size: int, isa: str) -> tuple[Half, Half]:
    """The keys and the values of one layer."""
    if isa not in KNOWN_ISAS:
        raise LayoutError(
            f"vLLM's CPU attention uses ISA {isa!r} here, whose KV block layout lmcache-cpu-copy does not "
            f"know (known: {', '.join(KNOWN_ISAS)}); extend lmcache_cpu_copy/layout.py"
        )
    if kv.dim() != 4 or kv.shape[1] != num_kv_heads or kv.shape[3] != 2 * head_size:
        raise LayoutError(
            f"vLLM CPU KV layer has shape {tuple(kv.shape)}; lmcache-cpu-copy expects "
            f"[num_blocks, {num_kv_heads} kv heads, block_size, {2 * head_size} = 2 x head size]. "
            "The pinned vLLM changed its CPU KV layout: re-check lmcache_cpu_copy/layout.py"
        )
    if not kv.is_contiguous():
        raise LayoutError("vLLM CPU KV layer is not contiguous; the block views below would be wrong")
    blocks, _, size, _ = kv.shape
    area = kv.view(blocks, num_kv_heads, 2 * size * head_size)
    half = size * head_size
    keys, values = area[:, :, :half], area[:, :, half:]
    if isa == "amx":
        return (
            Half(
                # [block, head, p // 16, p % 16, d // 2, d % 2]
                keys.view(blocks, num_kv_heads, size // 16, head_size // 2, 16, 2).permute(0, 1, 2, 4, 3, 5),
                lambda b, p: (b, ALL, p // 16, p % 16, ALL, ALL),
                (head_size // 2, 2),
            ),
            Half(
                # [block, head, d // 16, p // 2, d % 16, p % 2]
                values.view(blocks, num_kv_heads, head_size // 16, size // 2, 16, 2),
                lambda b, p: (b, ALL, ALL, p // 2, ALL, p % 2),
                (head_size // 16, 16),
            ),
        )
    return (
        Half(keys.view(blocks, num_kv_heads, head_size, size).transpose(2, 3), _by_position, (head_size,)),
        Half(values.view(blocks, num_kv_heads, size, head_size), _by_position, (head_size,)),
    )


def _by_position(blocks: torch.Tensor, positions: torch.Tensor) -> tuple[Any, ...]:
    return (blocks, ALL, positions, ALL)


def block_and_position(slots: torch.Tensor, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    slots = slots.to(torch.long)
    if bool((slots < 0).any()):
        raise LayoutError("slot mapping holds -1 inside the range LMCache asked to copy")
    return slots // block_size, slots % block_size
