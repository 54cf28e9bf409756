"""Data for `kvtier plan`: known model configs, GPU instance types and the reference measurements.

The shipped facts themselves are data, each entry with the published file it was read from
(kvtier.facts: tools/kvtier/facts/models/*.yaml and instances.yaml); this module gives the planner its
tables of them. Model entries use Hugging Face `config.json` key names, so a shipped model and a user's
`--model-config` go through the same parser (kvtier.plan.capacity.ModelSpec.from_hf_config); two keys are not
config.json's: `num_parameters` where the count cannot be derived from the config (mixture of experts) and
`gated`, true where the Hub repository asks users to accept its licence before it serves the files, so a
download without a token is refused (HTTP 401/403). `kvtier validate` reads the same entries
(kvtier.validate.model_facts), after a user's --model-config, the Hub and the local Hugging Face cache.

Units: every "GiB" is 2**30 bytes, every "GiB/s" is 2**30 bytes per second (the reference's "GB" are
binary: DESIGN.md section 4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvtier import facts as shipped

# name -> (Hugging Face repo ids that map to it, config.json subset): tools/kvtier/facts/models/*.yaml
KNOWN_MODELS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    name: (model.ids, model.config) for name, model in shipped.models().items()
}

GIB = 2**30

# GPU instance types (tools/kvtier/facts/instances.yaml, each with its source): (GPU model, GPUs, usable
# memory per GPU in GiB as the driver reports it, host GiB). Keys carry SageMaker's `ml.` prefix;
# kvtier.validate.checks.workload_rules.instance_facts reads EC2 names without it.
INSTANCE_TYPES: dict[str, tuple[str, int, float, float]] = {
    name: (t.gpu, t.gpus, shipped.gpus()[t.gpu].memory_gib, t.host_gib)
    for name, t in shipped.instance_types().items()
}

# NVMe instance store of each GPU instance type in GB (10**9 bytes; 0: EBS only), summed over its disks.
# Curvine workers put the L2's SSD tier there (the DLAMI mounts it at /opt/dlami/nvme, RAID 0 over several
# disks). Instance types without a known figure are not judged: validate warns that it lacks the size.
INSTANCE_STORE_GB: dict[str, int] = {
    name: t.instance_store_gb
    for name, t in shipped.instance_types().items()
    if t.instance_store_gb is not None
}

# CUDA compute capability (major, minor) of each GPU model above; vLLM keys its dtype support on it
# (kvtier.validate.checks.gpu_rules).
COMPUTE_CAPABILITY: dict[str, tuple[int, int]] = {
    name: gpu.compute_capability for name, gpu in shipped.gpus().items()
}


@dataclass(frozen=True)
class Reference:
    """The reference deployment (DESIGN.md section 1): Qwen2-7B-Instruct fp16, 256-token chunks, A10G."""

    model: str = "qwen2-7b-instruct"
    gpu: str = "A10G"  # kvtier.facts gpus; one per replica (tensor parallel 1)
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
