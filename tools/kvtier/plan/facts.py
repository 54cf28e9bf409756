"""Data for `kvtier plan`: known model configs, GPU instance types and the reference measurements.

Model entries use Hugging Face `config.json` key names, so a shipped model and a user's
`--model-config` go through the same parser (kvtier.plan.capacity.ModelSpec.from_hf_config). Only the keys the
planner needs are kept; `num_parameters` is added where the parameter count cannot be derived from the
config alone (mixture-of-experts). Figures are from each model's published config.json on the Hugging Face
Hub, https://huggingface.co/<repo id>/blob/main/config.json for the first repo id of each entry (the other ids
are the same architecture: instruct tunes of a base); the key names are that file's fields. Where a field
could not be confirmed it is left out (absent `torch_dtype` reads as bfloat16) or the model is not shipped.
One key is not config.json's: `gated`, true where the Hub repository asks users to accept its licence (or
share contact details) before it serves the files (meta-llama/*, google/gemma-*, mistralai/*), so a download
without a token is refused (HTTP 401/403).
`kvtier validate` reads the same entries (kvtier.validate.model_facts), with a user's --model-config or a
local Hugging Face cache before them.

Units: every "GiB" is 2**30 bytes, every "GiB/s" is 2**30 bytes per second (the reference's "GB" are
binary: DESIGN.md section 4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# name -> (Hugging Face repo ids that map to it, config.json subset)
KNOWN_MODELS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "qwen2-7b": (
        ("Qwen/Qwen2-7B", "Qwen/Qwen2-7B-Instruct"),
        {
            "model_type": "qwen2",
            "max_position_embeddings": 32768,
            "num_hidden_layers": 28,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "hidden_size": 3584,
            "intermediate_size": 18944,
            "vocab_size": 152064,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "sliding_window": 131072,
            "use_sliding_window": False,
        },
    ),
    "llama-3.1-8b": (
        (
            "meta-llama/Llama-3.1-8B",
            "meta-llama/Llama-3.1-8B-Instruct",
            "meta-llama/Meta-Llama-3.1-8B-Instruct",
        ),
        {
            "model_type": "llama",
            "max_position_embeddings": 131072,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "vocab_size": 128256,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "gated": True,
        },
    ),
    "mistral-7b-v0.1": (
        ("mistralai/Mistral-7B-v0.1", "mistralai/Mistral-7B-Instruct-v0.1"),
        {
            "model_type": "mistral",
            "max_position_embeddings": 32768,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "vocab_size": 32000,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "sliding_window": 4096,
            # mistralai/* repositories ask for contact details before serving files: the CI log in
            # TransformerLensOrg/TransformerLens PR 769 (2024-10-29) shows 401 "gated repo" for
            # Mistral-7B-v0.1, Mistral-7B-Instruct-v0.1, Mixtral-8x7B(-Instruct)-v0.1, Mistral-Nemo-Base-2407
            "gated": True,
        },
    ),
    "gemma-2-9b": (
        ("google/gemma-2-9b", "google/gemma-2-9b-it"),
        {
            "model_type": "gemma2",
            "max_position_embeddings": 8192,
            "num_hidden_layers": 42,
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "head_dim": 256,
            "hidden_size": 3584,
            "intermediate_size": 14336,
            "vocab_size": 256000,
            "tie_word_embeddings": True,
            "torch_dtype": "float32",
            # every other layer attends to a 4,096-token window (Gemma 2 alternates local/global)
            "sliding_window": 4096,
            "layer_types": ["sliding_attention", "full_attention"] * 21,
            "gated": True,
        },
    ),
    "llama-3.1-70b": (
        (
            "meta-llama/Llama-3.1-70B",
            "meta-llama/Llama-3.1-70B-Instruct",
            "meta-llama/Meta-Llama-3.1-70B-Instruct",
        ),
        {
            "model_type": "llama",
            "max_position_embeddings": 131072,  # rope_type llama3: vLLM takes this limit as it is
            "num_hidden_layers": 80,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "hidden_size": 8192,
            "intermediate_size": 28672,
            "vocab_size": 128256,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "gated": True,
        },
    ),
    "llama-3.3-70b": (
        ("meta-llama/Llama-3.3-70B-Instruct",),
        {
            "model_type": "llama",
            "max_position_embeddings": 131072,
            "num_hidden_layers": 80,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "hidden_size": 8192,
            "intermediate_size": 28672,
            "vocab_size": 128256,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "gated": True,
        },
    ),
    "llama-3.2-1b": (
        ("meta-llama/Llama-3.2-1B", "meta-llama/Llama-3.2-1B-Instruct"),
        {
            "model_type": "llama",
            "max_position_embeddings": 131072,
            "num_hidden_layers": 16,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 64,
            "hidden_size": 2048,
            "intermediate_size": 8192,
            "vocab_size": 128256,
            "tie_word_embeddings": True,
            "torch_dtype": "bfloat16",
            "gated": True,
        },
    ),
    "llama-3.2-3b": (
        ("meta-llama/Llama-3.2-3B", "meta-llama/Llama-3.2-3B-Instruct"),
        {
            "model_type": "llama",
            "max_position_embeddings": 131072,
            "num_hidden_layers": 28,
            "num_attention_heads": 24,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "hidden_size": 3072,
            "intermediate_size": 8192,
            "vocab_size": 128256,
            "tie_word_embeddings": True,
            "torch_dtype": "bfloat16",
            "gated": True,
        },
    ),
    # Llama 2: 4096 positions and no rope_scaling, so vLLM refuses any longer --max-model-len
    # (vllm-project/vllm issue 4346); full multi-head attention (KV heads = heads); float16 weights. The
    # 7B figures match microsoft/Olive's examples/llm/config.py for Llama-2-7b-chat-hf, the 13B ones the
    # Hub snapshot's config.json of Llama-2-13b-chat-hf as quoted in LlamaChinese/Llama-Chinese issue 177;
    # gated like every meta-llama repository (vllm-project/vllm PR 3963: 401 "Cannot access gated repo" for
    # meta-llama/Llama-2-7b-hf).
    "llama-2-7b": (
        ("meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-7b-chat-hf"),
        {
            "model_type": "llama",
            "max_position_embeddings": 4096,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 32,
            "hidden_size": 4096,
            "intermediate_size": 11008,
            "vocab_size": 32000,
            "tie_word_embeddings": False,
            "torch_dtype": "float16",
            "gated": True,
        },
    ),
    "llama-2-13b": (
        ("meta-llama/Llama-2-13b-hf", "meta-llama/Llama-2-13b-chat-hf"),
        {
            "model_type": "llama",
            "max_position_embeddings": 4096,
            "num_hidden_layers": 40,
            "num_attention_heads": 40,
            "num_key_value_heads": 40,
            "hidden_size": 5120,
            "intermediate_size": 13824,
            "vocab_size": 32000,
            "tie_word_embeddings": False,
            "torch_dtype": "float16",
            "gated": True,
        },
    ),
    # Qwen2.5: the base checkpoints of 7B and up say 131072 positions, the instruct ones 32768 (longer needs
    # YaRN rope scaling added to config.json); 3B and below say 32768 for both.
    "qwen2.5-0.5b": (
        ("Qwen/Qwen2.5-0.5B",),
        {
            "model_type": "qwen2",
            "max_position_embeddings": 32768,
            "num_hidden_layers": 24,
            "num_attention_heads": 14,
            "num_key_value_heads": 2,
            "hidden_size": 896,
            "intermediate_size": 4864,
            "vocab_size": 151936,
            "tie_word_embeddings": True,
            "torch_dtype": "bfloat16",
            "use_sliding_window": False,
        },
    ),
    "qwen2.5-3b": (
        ("Qwen/Qwen2.5-3B",),
        {
            "model_type": "qwen2",
            "max_position_embeddings": 32768,
            "num_hidden_layers": 36,
            "num_attention_heads": 16,
            "num_key_value_heads": 2,
            "hidden_size": 2048,
            "intermediate_size": 11008,
            "vocab_size": 151936,
            "tie_word_embeddings": True,
            "torch_dtype": "bfloat16",
            "use_sliding_window": False,
        },
    ),
    "qwen2.5-7b": (
        ("Qwen/Qwen2.5-7B",),
        {
            "model_type": "qwen2",
            "max_position_embeddings": 131072,
            "num_hidden_layers": 28,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "hidden_size": 3584,
            "intermediate_size": 18944,
            "vocab_size": 152064,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "use_sliding_window": False,
        },
    ),
    "qwen2.5-7b-instruct": (
        ("Qwen/Qwen2.5-7B-Instruct",),
        {
            "model_type": "qwen2",
            "max_position_embeddings": 32768,
            "num_hidden_layers": 28,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "hidden_size": 3584,
            "intermediate_size": 18944,
            "vocab_size": 152064,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "use_sliding_window": False,
        },
    ),
    "qwen2.5-14b": (
        ("Qwen/Qwen2.5-14B",),
        {
            "model_type": "qwen2",
            "max_position_embeddings": 131072,
            "num_hidden_layers": 48,
            "num_attention_heads": 40,
            "num_key_value_heads": 8,
            "hidden_size": 5120,
            "intermediate_size": 13824,
            "vocab_size": 152064,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "use_sliding_window": False,
        },
    ),
    "qwen2.5-32b": (
        ("Qwen/Qwen2.5-32B",),
        {
            "model_type": "qwen2",
            "max_position_embeddings": 131072,
            "num_hidden_layers": 64,
            "num_attention_heads": 40,
            "num_key_value_heads": 8,
            "hidden_size": 5120,
            "intermediate_size": 27648,
            "vocab_size": 152064,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "use_sliding_window": False,
        },
    ),
    "qwen2.5-72b-instruct": (
        ("Qwen/Qwen2.5-72B-Instruct",),
        {
            "model_type": "qwen2",
            "max_position_embeddings": 32768,
            "num_hidden_layers": 80,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "hidden_size": 8192,
            "intermediate_size": 29568,
            "vocab_size": 152064,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "use_sliding_window": False,
        },
    ),
    "qwen3-4b": (
        ("Qwen/Qwen3-4B",),
        {
            "model_type": "qwen3",
            "max_position_embeddings": 40960,
            "num_hidden_layers": 36,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "hidden_size": 2560,
            "intermediate_size": 9728,
            "vocab_size": 151936,
            "tie_word_embeddings": True,
            "torch_dtype": "bfloat16",
        },
    ),
    "qwen3-8b": (
        ("Qwen/Qwen3-8B",),
        {
            "model_type": "qwen3",
            "max_position_embeddings": 40960,
            "num_hidden_layers": 36,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "hidden_size": 4096,
            "intermediate_size": 12288,
            "vocab_size": 151936,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
        },
    ),
    "qwen3-14b": (
        ("Qwen/Qwen3-14B",),
        {
            "model_type": "qwen3",
            "max_position_embeddings": 40960,
            "num_hidden_layers": 40,
            "num_attention_heads": 40,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "hidden_size": 5120,
            "intermediate_size": 17408,
            "vocab_size": 151936,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
        },
    ),
    "qwen3-32b": (
        ("Qwen/Qwen3-32B",),
        {
            "model_type": "qwen3",
            "max_position_embeddings": 40960,
            "num_hidden_layers": 64,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "hidden_size": 5120,
            "intermediate_size": 25600,
            "vocab_size": 151936,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
        },
    ),
    "mistral-nemo-base-2407": (
        ("mistralai/Mistral-Nemo-Base-2407",),
        {
            "model_type": "mistral",
            "max_position_embeddings": 128000,
            "num_hidden_layers": 40,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "hidden_size": 5120,
            "intermediate_size": 14336,
            "vocab_size": 131072,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "gated": True,  # see mistral-7b-v0.1
        },
    ),
    "mixtral-8x7b": (
        ("mistralai/Mixtral-8x7B-v0.1", "mistralai/Mixtral-8x7B-Instruct-v0.1"),
        {
            "model_type": "mixtral",
            "max_position_embeddings": 32768,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "vocab_size": 32000,
            "num_parameters": 46.7e9,  # 8 experts, 2 per token: Mistral AI's announcement's total
            "gated": True,  # see mistral-7b-v0.1
        },
    ),
    "gemma-2-2b": (
        ("google/gemma-2-2b", "google/gemma-2-2b-it"),
        {
            "model_type": "gemma2",
            "max_position_embeddings": 8192,
            "num_hidden_layers": 26,
            "num_attention_heads": 8,
            "num_key_value_heads": 4,
            "head_dim": 256,
            "hidden_size": 2304,
            "intermediate_size": 9216,
            "vocab_size": 256000,
            "tie_word_embeddings": True,
            "sliding_window": 4096,
            "layer_types": ["sliding_attention", "full_attention"] * 13,
            "gated": True,
        },
    ),
    "gemma-2-27b": (
        ("google/gemma-2-27b", "google/gemma-2-27b-it"),
        {
            "model_type": "gemma2",
            "max_position_embeddings": 8192,
            "num_hidden_layers": 46,
            "num_attention_heads": 32,
            "num_key_value_heads": 16,
            "head_dim": 128,
            "hidden_size": 4608,
            "intermediate_size": 36864,
            "vocab_size": 256000,
            "tie_word_embeddings": True,
            "sliding_window": 4096,
            "layer_types": ["sliding_attention", "full_attention"] * 23,
            "gated": True,
        },
    ),
    "deepseek-v2-lite": (
        ("deepseek-ai/DeepSeek-V2-Lite", "deepseek-ai/DeepSeek-V2-Lite-Chat"),
        {
            "model_type": "deepseek_v2",
            "max_position_embeddings": 163840,
            "num_hidden_layers": 27,
            "num_attention_heads": 16,
            "num_key_value_heads": 16,
            "hidden_size": 2048,
            "kv_lora_rank": 512,
            "qk_rope_head_dim": 64,
            "qk_nope_head_dim": 128,
            "v_head_dim": 128,
            "vocab_size": 102400,
            "torch_dtype": "bfloat16",
            "num_parameters": 15.7e9,  # mixture of experts: not derivable from the dense formula
        },
    ),
}

GIB = 2**30

# GPU instance types: (GPU model, GPUs, usable memory per GPU in GiB as the driver reports it, host GiB).
# GPUs and host memory: AWS's instance type pages (https://aws.amazon.com/ec2/instance-types/g4/, .../g5/,
# .../g6/, .../g6e/, .../p3/, .../p4/, .../p5/; SageMaker's `ml.` types have the same hardware). Memory per
# GPU: the total nvidia-smi reports (T4 15360 MiB, V100-SXM2-16GB 16160 MiB, A10G 23028 MiB, L4 23034 MiB,
# L40S 46068 MiB, A100-SXM4-40GB 40960 MiB, A100-SXM4-80GB 81920 MiB, H100-SXM 81559 MiB). Keys carry
# SageMaker's `ml.` prefix; kvtier.validate.checks.workload_rules.instance_facts reads EC2 names without it.
INSTANCE_TYPES: dict[str, tuple[str, int, float, float]] = {
    "ml.g4dn.xlarge": ("T4", 1, 15.0, 16),
    "ml.g4dn.2xlarge": ("T4", 1, 15.0, 32),
    "ml.g4dn.4xlarge": ("T4", 1, 15.0, 64),
    "ml.g4dn.8xlarge": ("T4", 1, 15.0, 128),
    "ml.g4dn.16xlarge": ("T4", 1, 15.0, 256),
    "ml.g4dn.12xlarge": ("T4", 4, 15.0, 192),
    "ml.p3.2xlarge": ("V100-16GB", 1, 15.78, 61),
    "ml.p3.8xlarge": ("V100-16GB", 4, 15.78, 244),
    "ml.p3.16xlarge": ("V100-16GB", 8, 15.78, 488),
    "ml.g5.xlarge": ("A10G", 1, 22.49, 16),
    "ml.g5.2xlarge": ("A10G", 1, 22.49, 32),
    "ml.g5.4xlarge": ("A10G", 1, 22.49, 64),
    "ml.g5.8xlarge": ("A10G", 1, 22.49, 128),
    "ml.g5.16xlarge": ("A10G", 1, 22.49, 256),
    "ml.g5.12xlarge": ("A10G", 4, 22.49, 192),
    "ml.g5.24xlarge": ("A10G", 4, 22.49, 384),
    "ml.g5.48xlarge": ("A10G", 8, 22.49, 768),
    "ml.g6.xlarge": ("L4", 1, 22.49, 16),
    "ml.g6.2xlarge": ("L4", 1, 22.49, 32),
    "ml.g6.4xlarge": ("L4", 1, 22.49, 64),
    "ml.g6.8xlarge": ("L4", 1, 22.49, 128),
    "ml.g6.16xlarge": ("L4", 1, 22.49, 256),
    "ml.g6.12xlarge": ("L4", 4, 22.49, 192),
    "ml.g6.24xlarge": ("L4", 4, 22.49, 384),
    "ml.g6.48xlarge": ("L4", 8, 22.49, 768),
    "ml.g6e.xlarge": ("L40S", 1, 44.99, 32),
    "ml.g6e.2xlarge": ("L40S", 1, 44.99, 64),
    "ml.g6e.4xlarge": ("L40S", 1, 44.99, 128),
    "ml.g6e.8xlarge": ("L40S", 1, 44.99, 256),
    "ml.g6e.16xlarge": ("L40S", 1, 44.99, 512),
    "ml.g6e.12xlarge": ("L40S", 4, 44.99, 384),
    "ml.g6e.24xlarge": ("L40S", 4, 44.99, 768),
    "ml.g6e.48xlarge": ("L40S", 8, 44.99, 1536),
    "ml.p4d.24xlarge": ("A100-40GB", 8, 40.0, 1152),
    "ml.p4de.24xlarge": ("A100-80GB", 8, 80.0, 1152),
    "ml.p5.48xlarge": ("H100-80GB", 8, 79.65, 2048),
}

# NVMe instance store of each GPU instance type in GB (10**9 bytes; 0: EBS only), summed over its disks:
# the "Instance storage" column of AWS's instance type pages (https://aws.amazon.com/ec2/instance-types/g4/,
# .../g5/, .../g6e/, .../p3/, .../p4/, .../p5/; e.g. g6e.4xlarge 1 x 600 GB, g5.48xlarge 2 x 3800 GB). Curvine
# workers put the L2's SSD tier there (the DLAMI mounts it at /opt/dlami/nvme, RAID 0 over several disks).
# Instance types not listed (the g6 family among them) are not judged: validate warns that it lacks the size.
INSTANCE_STORE_GB: dict[str, int] = {
    "ml.g4dn.xlarge": 125,
    "ml.g4dn.2xlarge": 225,
    "ml.g4dn.4xlarge": 225,
    "ml.g4dn.8xlarge": 900,
    "ml.g4dn.12xlarge": 900,
    "ml.g4dn.16xlarge": 900,
    "ml.p3.2xlarge": 0,
    "ml.p3.8xlarge": 0,
    "ml.p3.16xlarge": 0,
    "ml.g5.xlarge": 250,
    "ml.g5.2xlarge": 450,
    "ml.g5.4xlarge": 600,
    "ml.g5.8xlarge": 900,
    "ml.g5.16xlarge": 1900,
    "ml.g5.12xlarge": 3800,
    "ml.g5.24xlarge": 3800,
    "ml.g5.48xlarge": 7600,
    "ml.g6e.xlarge": 250,
    "ml.g6e.2xlarge": 450,
    "ml.g6e.4xlarge": 600,
    "ml.g6e.8xlarge": 900,
    "ml.g6e.16xlarge": 1900,
    "ml.g6e.12xlarge": 3800,
    "ml.g6e.24xlarge": 3800,
    "ml.g6e.48xlarge": 7600,
    "ml.p4d.24xlarge": 8000,
    "ml.p4de.24xlarge": 8000,
    "ml.p5.48xlarge": 30720,
}

# CUDA compute capability (major, minor) of each GPU model above: NVIDIA's table,
# https://developer.nvidia.com/cuda-gpus (T4 7.5, V100 7.0, A10G 8.6 as the A10, L4 8.9, L40S 8.9, A100 8.0,
# H100 9.0). vLLM keys its dtype support on it (kvtier.validate.checks.gpu_rules).
COMPUTE_CAPABILITY: dict[str, tuple[int, int]] = {
    "T4": (7, 5),
    "V100-16GB": (7, 0),
    "A10G": (8, 6),
    "L4": (8, 9),
    "L40S": (8, 9),
    "A100-40GB": (8, 0),
    "A100-80GB": (8, 0),
    "H100-80GB": (9, 0),
}


@dataclass(frozen=True)
class Reference:
    """The reference deployment (DESIGN.md section 1): Qwen2-7B-Instruct fp16, 256-token chunks, A10G."""

    model: str = "qwen2-7b"
    l2_write_gib_s: float = 9.6  # 0.1028 GiB written in 10.7 ms
    l2_read_gib_s: float = 1.84  # 0.1028 GiB read across nodes in 55.75 ms
    read_tokens: int = 1925
    read_ms: float = 55.75
    cold_ttft_ms: float = 774.0  # at 2,500 tokens
    hit_ttft_ms: float = 287.0  # at 2,500 tokens, L2 hit
    ttft_tokens: int = 2500
    speedups: dict[int, float] = field(default_factory=lambda: {500: 0.99, 1000: 1.7, 2500: 2.7, 3000: 2.2})


REFERENCE = Reference()


@dataclass(frozen=True)
class MeasuredMix:
    """The load benchmark's mix as `kvtier load` measured it on the real node (2026-12-04,
    docs/performance.md): three CPU replicas with all tiers behind round robin, 240 requests at 2 and 3
    QPS. Round robin, not the chart's prefix affinity: it spreads load as a fleet must, so asks the most
    of L2."""

    prompt_tokens: float = 1632.0
    l0_share: float = 0.532
    connector_share: float = 0.230
    source: str = "real node, kvtier load, all tiers, round robin (docs/performance.md)"


MEASURED_MIX = MeasuredMix()
