"""vLLM CPU's paged KV layout, as the pinned vLLM's cache-write kernel lays it out (measured, not documented).

One tensor per attention layer, shaped [num_blocks, num_kv_heads, block_size, 2 * head_size]. vLLM views it
as [num_blocks, num_kv_heads, 2 * block_size, head_size] and hands the kernel the two halves of each
(block, head) area. What the kernel then writes depends on the attention ISA vLLM picks for the CPU:
with `vec` and `vec16` (x86 without AMX, the machines this rig runs on) the first half holds the block's
keys transposed, [head_size, block_size] (one row per head dimension), and the second half its values,
[block_size, head_size]. Other ISAs (`amx` packs tiles, `neon`, ...) are not known here and are refused.
A token in slot s lives in block s // block_size at position s % block_size.
tests/engine/test_cpu_copy_adapter.py re-checks this against the kernel itself.
"""

from __future__ import annotations

import torch

KNOWN_ISAS = ("vec", "vec16")


class LayoutError(RuntimeError):
    """The engine's KV tensors are not the layout this stand-in was written for."""


def attention_isa(dtype: torch.dtype, block_size: int, head_size: int) -> str:
    """The ISA vLLM's CPU attention uses for this cache (its own choice function)."""
    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

    return str(_get_attn_isa(dtype, block_size, head_size))


def split_layer(
    kv: torch.Tensor, num_kv_heads: int, head_size: int, isa: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """Key and value views of one layer, each indexed [block, kv head, position in block, head dim]."""
    if isa not in KNOWN_ISAS:
        raise LayoutError(
            f"vLLM's CPU attention uses ISA {isa!r} here, whose KV block layout lmcache-cpu-copy does not "
            f"know (known: {', '.join(KNOWN_ISAS)}); run the rig on a CPU without AMX or extend layout.py"
        )
    if kv.dim() != 4 or kv.shape[1] != num_kv_heads or kv.shape[3] != 2 * head_size:
        raise LayoutError(
            f"vLLM CPU KV layer has shape {tuple(kv.shape)}; lmcache-cpu-copy expects "
            f"[num_blocks, {num_kv_heads} kv heads, block_size, {2 * head_size} = 2 x head size]. "
            "The pinned vLLM changed its CPU KV layout: re-check lmcache_cpu_copy/layout.py"
        )
    if not kv.is_contiguous():
        raise LayoutError("vLLM CPU KV layer is not contiguous; the block views below would be wrong")
    num_blocks, _, block_size, _ = kv.shape
    area = kv.view(num_blocks, num_kv_heads, 2 * block_size * head_size)
    half = block_size * head_size
    keys = area[:, :, :half].view(num_blocks, num_kv_heads, head_size, block_size).transpose(2, 3)
    values = area[:, :, half:].view(num_blocks, num_kv_heads, block_size, head_size)
    return keys, values


def block_and_position(slots: torch.Tensor, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    slots = slots.to(torch.long)
    if bool((slots < 0).any()):
        raise LayoutError("slot mapping holds -1 inside the range LMCache asked to copy")
    return slots // block_size, slots % block_size
