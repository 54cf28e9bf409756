"""Model configs the tests make themselves (no upstream file): shapes for models outside the shipped facts."""

from __future__ import annotations

from typing import Any

# A 13B-class dense decoder: 40 layers of 5120, 40 heads (no GQA), 4096 positions, bfloat16.
DENSE_13B: dict[str, Any] = {
    "model_type": "llama",
    "max_position_embeddings": 4096,
    "num_hidden_layers": 40,
    "num_attention_heads": 40,
    "num_key_value_heads": 40,
    "hidden_size": 5120,
    "intermediate_size": 13824,
    "vocab_size": 32000,
    "torch_dtype": "bfloat16",
}
DENSE_13B_BYTES = 26_031_728_640  # its safetensors index's total_size (24.2 GiB)
