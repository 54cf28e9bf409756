"""Rules on what vLLM makes of a model's dtype and memory share on the GPU its instance type has.

Each rule implements a check the pinned vLLM (toolchain/versions.env; its source in the engine venv)
runs at startup, on the GPU model, GPU count and memory of the model's `instanceType` (the planner's table,
kvtier.plan.facts.INSTANCE_TYPES and COMPUTE_CAPABILITY, read as workload_rules.instance_facts reads it) and
the model's config.json (kvtier.validate.model_facts: --model-config, a local folder or Hugging Face cache,
or the planner's shipped configs): an unknown instance type or model is not judged. The chart passes
`dtype`, `gpuMemoryUtilization` and `gpusPerReplica` as `--dtype`, `--gpu-memory-utilization` and
`--tensor-parallel-size` on both targets (templates/_engine.tpl, _hyperpod.tpl), and refuses those flags in
extraArgs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kvtier import facts as shipped
from kvtier.plan.capacity import DTYPE_BYTES, ModelSpec
from kvtier.plan.facts import COMPUTE_CAPABILITY, GIB
from kvtier.plan.inputs import kv_dtype_bytes
from kvtier.upstream import vllm_options
from kvtier.validate import model_facts
from kvtier.validate.checks.workload_rules import gpu_target, instance_facts
from kvtier.validate.rules import Hit, ValuesContext, rule
from kvtier.values import extra_args, lookup, model_entries

# the pinned vLLM's vllm/platforms/cuda.py, CudaPlatform.check_if_supports_dtype (called by
# vllm/v1/worker/gpu_worker.py Worker.init_device): bfloat16 below compute capability 8.0 raises "Bfloat16 is
# only supported on GPUs with compute capability of at least 8.0". CudaPlatform.supported_dtypes: bfloat16,
# float16, float32 from 8.0; float16, float32 from 6.0.
BF16_MIN_CAPABILITY = (8, 0)

# the pinned vLLM's vllm/config/model.py, _FLOAT16_NOT_SUPPORTED_MODELS (model_type -> reason), checked by
# _check_valid_dtype for every dtype vLLM resolves, on every platform: "The model type 'gemma2' does not
# support float16. Reason: Numerical instability. Please use bfloat16 or float32 instead."
FLOAT16_NOT_SUPPORTED = {
    "gemma2": "numerical instability",
    "gemma3": "numerical instability",
    "gemma3_text": "numerical instability",
    "glm4": "numerical instability",
}
# vLLM's dtype names (_STR_DTYPE_TO_TORCH_DTYPE) as the torch dtype they stand for
TORCH_DTYPE = {
    "half": "float16",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float": "float32",
    "float32": "float32",
}

# Hugging Face ids of Gemma 2 and Gemma 3 checkpoints (google/gemma-2-9b-it, google/gemma-3-4b-it, their
# fine-tunes and quantizations), not Gemma 1's google/gemma-2b nor Gemma 3n's google/gemma-3n-E4B, whose model
# types vLLM lets run in float16. A model without a shipped config is judged by its name: a warning only.
GEMMA_2_OR_3 = re.compile(r"gemma-([23])-", re.IGNORECASE)

# extraArgs that change what the weights take on the GPU or how vLLM sizes the KV cache: quantized weights
# (--quantization/-q), weights held in host memory (--cpu-offload-gb, --offload-*), a fixed KV cache size that
# ignores --gpu-memory-utilization (--kv-cache-memory-bytes), another architecture (--hf-overrides), any
# setting from a file (--config). The pinned vLLM's vllm/engine/arg_utils.py EngineArgs.add_cli_args.
SIZE_CHANGING_FLAGS = (
    "--quantization",
    "--cpu-offload-gb",
    "--cpu-offload-params",
    "--offload-backend",
    "--offload-params",
    "--kv-cache-memory-bytes",
    "--hf-overrides",
    "--config",
)
SIZE_CHANGING_SHORT = ("-q",)
VLLM_DEFAULT_UTILIZATION = 0.9  # the pinned vLLM's vllm/config/cache.py CacheConfig.gpu_memory_utilization

# extraArgs that split or fix the KV cache in ways the arithmetic below does not model: context parallelism
# shares one sequence's KV among ranks (--decode-context-parallel-size/-dcp, --prefill-context-parallel-size/
# -pcp), a block count override replaces the memory-derived one, and layers kept out of a smaller
# --kv-cache-dtype (--kv-cache-dtype-skip-layers) take more than it. With one of them, or a KV cache dtype
# whose size validate does not know, the one-sequence check below stays a warning.
KV_SPLITTING_FLAGS = (
    "--decode-context-parallel-size",
    "--prefill-context-parallel-size",
    "--num-gpu-blocks-override",
    "--kv-cache-dtype-skip-layers",
)
# KV cache dtypes whose bytes per element validate knows (kvtier.plan.inputs.kv_dtype_bytes): vLLM's auto (the
# model's dtype), the 16-bit ones and every fp8 variant (one byte); the 4-bit and other packed ones are not
# modelled.
KNOWN_KV_DTYPES = ("auto", "float16", "bfloat16", "half")
# config.json keys of models whose layers are not all attention layers (Mamba, linear attention, hybrid
# patterns): vLLM keeps a fixed-size state for those, which the per-layer KV arithmetic would overcount.
HYBRID_CONFIG_KEYS = (
    "layers_block_type",
    "hybrid_override_pattern",
    "attn_layer_indices",
    "full_attention_interval",
    "linear_attention_layers",
)
# Sliding-window layers keep only the window's tokens in vLLM's KV cache (its hybrid KV cache manager sizes
# them by min(window, max-model-len)), so the per-token arithmetic overcounts them: uncertain too.
SLIDING_CONFIG_KEYS = ("interleaved_sliding_window", "sliding_window_pattern")
ATTENTION_LAYER_TYPES = {"full_attention"}


@dataclass(frozen=True)
class Gpu:
    instance_type: str
    model: str  # the GPU model ("T4")
    count: int
    memory_gib: float  # per GPU
    capability: tuple[int, int] | None
    unconfirmed: str = ""  # the instance type's shipped figures not confirmed against their source

    @property
    def capability_text(self) -> str:
        return ".".join(str(n) for n in self.capability) if self.capability else "unknown"


def gpu_of(values: dict[str, Any], model: dict[str, Any]) -> Gpu | None:
    """The GPU of a model's instance type, on a GPU target (not `engine.accelerator: cpu`), if known."""
    if not gpu_target(values):
        return None
    facts = instance_facts(model.get("instanceType"))
    if not facts:
        return None
    name, count, memory, _ = facts
    instance = model.get("instanceType")
    doubt = shipped.unconfirmed_instance(instance, ("gpu", "gpus"), gpu_figures=True)
    return Gpu(str(instance), name, count, memory, COMPUTE_CAPABILITY.get(name), doubt)


def _dtype(model: dict[str, Any]) -> str:
    """The `--dtype` the chart passes (none, vLLM's `auto`, when unset), lower-cased as vLLM reads it."""
    return str(model.get("dtype") or "auto").lower()


def resolved_dtype(dtype: str, config_dtype: str, model_type: str, gpu: Gpu) -> str:
    """The torch dtype vLLM runs a model in (the pinned vLLM's vllm/config/model.py _get_and_verify_dtype),
    with `auto` resolved by _resolve_auto_dtype over CudaPlatform.supported_dtypes less float16 refusals."""
    if dtype != "auto":
        return TORCH_DTYPE.get(dtype, dtype)
    bf16 = gpu.capability is None or gpu.capability >= BF16_MIN_CAPABILITY
    supported = [d for d in ("bfloat16", "float16", "float32") if bf16 or d != "bfloat16"]
    if model_type in FLOAT16_NOT_SUPPORTED:
        supported.remove("float16")
    preferred = supported[0]
    config = TORCH_DTYPE.get(config_dtype, config_dtype)
    if config == "float32":
        config = preferred
    return config if config in supported else preferred


@rule(
    "dtype-supported-by-gpu",
    reason="vLLM refuses --dtype bfloat16 on a GPU of compute capability below 8.0 (g4dn's T4, p3's V100): "
    "the engine exits at startup",
    remedy="set the model's dtype to half (float16), or auto, which runs a bfloat16 model in float16 there; "
    "or choose an instance type with an Ampere or newer GPU (g5, g6, g6e, p4d, p5)",
)
def dtype_supported_by_gpu(ctx: ValuesContext) -> Iterator[Hit]:
    for i, model in model_entries(ctx.values):
        gpu = gpu_of(ctx.values, model)
        if gpu is None or gpu.capability is None or _dtype(model) != "bfloat16":
            continue
        if gpu.capability < BF16_MIN_CAPABILITY:
            yield Hit(
                f"models[{i}].dtype bfloat16 on {gpu.instance_type}: its {gpu.model} GPU has compute "
                f"capability {gpu.capability_text}, and vLLM needs at least 8.0 for bfloat16 "
                "(expected half, float16, float32 or auto)",
                ("models", i, "dtype"),
                unconfirmed=gpu.unconfirmed,
            )


@rule(
    "dtype-supported-by-model",
    reason="vLLM refuses float16 for some model types (gemma2, gemma3, glm4: numerical instability) while "
    "building the model config: the engine exits before loading the weights",
    remedy="set the model's dtype to bfloat16 or auto (auto picks bfloat16, or float32 on GPUs without "
    "bfloat16), or float32",
)
def dtype_supported_by_model(ctx: ValuesContext) -> Iterator[Hit]:
    for i, model in model_entries(ctx.values):
        if TORCH_DTYPE.get(_dtype(model)) != "float16":
            continue
        name = str(model.get("model") or "")
        found = model_facts.find(model, ctx.model_configs)
        if found:
            model_type = str(found.config.get("model_type") or "")
            if model_type in FLOAT16_NOT_SUPPORTED:
                yield Hit(
                    f"models[{i}].dtype {model.get('dtype')}: vLLM refuses float16 for {name} (model type "
                    f"{model_type!r}, {FLOAT16_NOT_SUPPORTED[model_type]}); expected bfloat16, float32 "
                    "or auto",
                    ("models", i, "dtype"),
                )
            continue
        match = GEMMA_2_OR_3.search(name)
        if match:
            yield Hit(
                f"models[{i}].dtype {model.get('dtype')}: {name} looks like a Gemma {match.group(1)} "
                f"checkpoint, a model type vLLM refuses float16 for (numerical instability); expected "
                "bfloat16, float32 or auto",
                ("models", i, "dtype"),
                severity="warning",
            )


def _sizes_changed(model: dict[str, Any]) -> bool:
    """Whether extraArgs hold a flag (or an abbreviation vLLM may expand to one) that changes the weights'
    footprint or the KV cache budget, so that the arithmetic below would not be vLLM's."""
    for setting in extra_args(model).settings:
        name = setting.name
        if name in SIZE_CHANGING_SHORT:
            return True
        if name.startswith("--") and len(name) > 2 and any(f.startswith(name) for f in SIZE_CHANGING_FLAGS):
            return True
    return False


def _parallel(model: dict[str, Any]) -> tuple[int, int] | None:
    """(tensor, pipeline) parallel sizes: gpusPerReplica and extraArgs' --pipeline-parallel-size."""
    tp = model.get("gpusPerReplica", 1)
    pp_text = extra_args(model).value("--pipeline-parallel-size", "1") or "1"
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1 or not pp_text.isdigit():
        return None
    return tp, max(int(pp_text), 1)


def kv_bytes_per_gpu(spec: ModelSpec, kv_bytes: int, tokens: int, tp: int, pp: int) -> float:
    """KV cache bytes one sequence of `tokens` takes on each GPU. Each tensor-parallel rank holds
    max(1, KV heads / tp) heads (vLLM's ModelConfig.get_num_kv_heads) or, with MLA, the whole latent; each
    pipeline stage a share of the layers. Sliding-window layers are counted at the window only (the hybrid
    KV cache manager's saving, a lower bound where vLLM keeps every layer whole)."""
    layers = spec.layers / pp
    if spec.mla_dim:
        per_layer = spec.mla_dim * kv_bytes
    else:
        per_layer = 2 * max(1, spec.kv_heads // tp) * spec.head_dim * kv_bytes
    sliding = spec.sliding_layers / pp if spec.sliding_window else 0.0
    window = min(spec.sliding_window, tokens)
    return per_layer * ((layers - sliding) * tokens + sliding * window)


@dataclass(frozen=True)
class Weights:
    """A model's weights as vLLM loads them on one replica's GPUs."""

    facts: model_facts.ModelFacts
    spec: ModelSpec
    dtype: str  # the torch dtype vLLM runs in
    total: float  # bytes of all the weights
    tp: int
    pp: int


def weights_of(ctx: ValuesContext, model: dict[str, Any], gpu: Gpu) -> Weights | None:
    """The weights vLLM loads for a model on `gpu`, when its facts are known and extraArgs change nothing:
    safetensors' total_size where a model folder gave it (scaled from the stored dtype to the one vLLM runs
    in), else the parameter count (config.json) x the dtype's bytes."""
    found = model_facts.find(model, ctx.model_configs)
    parallel = _parallel(model)
    if found is None or parallel is None or _sizes_changed(model):
        return None
    spec = ModelSpec.from_hf_config(found.name, found.config, found.origin)
    dtype = resolved_dtype(_dtype(model), spec.dtype, str(found.config.get("model_type") or ""), gpu)
    if dtype not in DTYPE_BYTES:
        return None
    if found.weight_bytes and found.quantized:
        total = float(found.weight_bytes)  # packed as the quantization stores them
    elif found.weight_bytes and TORCH_DTYPE.get(spec.dtype, spec.dtype) in DTYPE_BYTES:
        total = found.weight_bytes / DTYPE_BYTES[TORCH_DTYPE.get(spec.dtype, spec.dtype)] * DTYPE_BYTES[dtype]
    elif found.quantized:
        return None  # the parameter count says nothing of a quantized checkpoint's bytes
    else:
        total = spec.params * DTYPE_BYTES[dtype]
    return Weights(found, spec, dtype, total, *parallel)


# The config.json keys the weight and KV arithmetic reads (kvtier.plan.capacity.ModelSpec.from_hf_config).
SHAPE_KEYS = (
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_size",
    "intermediate_size", "vocab_size", "tie_word_embeddings", "torch_dtype", "num_parameters",
    "max_position_embeddings", "sliding_window", "layer_types", "kv_lora_rank", "qk_rope_head_dim",
)  # fmt: skip


def _rests_on(weights: Weights, gpu: Gpu) -> str:
    return shipped.doubts(weights.facts.rests_on(*SHAPE_KEYS), gpu.unconfirmed)


def _beyond_instance(weights: Weights, gpu: Gpu) -> bool:
    """The weights exceed the whole memory of every GPU the instance type has."""
    return weights.total > gpu.count * gpu.memory_gib * GIB


@rule(
    "weights-fit-instance-gpus",
    reason="a replica runs on the GPUs of one node: weights larger than all the GPU memory of its instance "
    "type cannot load whatever gpuMemoryUtilization or tensor parallel size is chosen, and vLLM exits with "
    "CUDA out of memory while loading them",
    remedy="choose an instance type whose GPUs together hold the weights with room for the KV cache (see "
    "`kvtier plan`), or serve a quantized checkpoint of the model",
)
def weights_fit_instance_gpus(ctx: ValuesContext) -> Iterator[Hit]:
    for i, model in model_entries(ctx.values):
        gpu = gpu_of(ctx.values, model)
        weights = weights_of(ctx, model, gpu) if gpu else None
        if gpu is None or weights is None or not _beyond_instance(weights, gpu):
            continue
        yield Hit(
            f"models[{i}] ({model.get('model')}) has {weights.total / GIB:.1f} GiB of weights in "
            f"{weights.dtype}; {gpu.instance_type} has {gpu.count} x {gpu.memory_gib:g} GiB {gpu.model} = "
            f"{gpu.count * gpu.memory_gib:.1f} GiB of GPU memory in all: no replica can load them",
            ("models", i, "instanceType"),
            unconfirmed=_rests_on(weights, gpu),
        )


@rule(
    "gpu-memory-holds-weights",
    reason="vLLM caps weights, activations and KV cache at gpuMemoryUtilization x each GPU's memory: weights "
    'above that leave no KV cache block and the engine exits ("No available memory for the cache blocks")',
    remedy="raise gpuMemoryUtilization (vLLM's default is 0.9), spread the model over more GPUs "
    "(gpusPerReplica), lower maxModelLen, or choose an instance type with more GPU memory",
)
def gpu_memory_holds_weights(ctx: ValuesContext) -> Iterator[Hit]:
    # the pinned vLLM's vllm/v1/worker/utils.py request_memory (total x gpu_memory_utilization per GPU),
    # vllm/v1/worker/gpu_worker.py Worker.determine_available_memory (KV = that - weights - activation peak),
    # vllm/v1/core/kv_cache_utils.py _check_enough_kv_cache_memory (refuses no memory at all, and a KV cache
    # smaller than one max-model-len sequence).
    for i, model in model_entries(ctx.values):
        gpu = gpu_of(ctx.values, model)
        weights = weights_of(ctx, model, gpu) if gpu else None
        utilization = model.get("gpuMemoryUtilization")
        if utilization is None:
            utilization = VLLM_DEFAULT_UTILIZATION
        if gpu is None or weights is None or _beyond_instance(weights, gpu):
            continue  # unknown, or weights-fit-instance-gpus reports it
        if isinstance(utilization, bool) or not isinstance(utilization, int | float) or utilization <= 0:
            continue  # the schema reports it
        tp, pp, spec, dtype = weights.tp, weights.pp, weights.spec, weights.dtype
        budget = utilization * gpu.memory_gib * GIB
        per_gpu = weights.total / (tp * pp)
        where = f"{gpu.instance_type}'s {gpu.memory_gib:g} GiB {gpu.model}"
        if per_gpu >= budget:
            yield Hit(
                f"models[{i}].gpuMemoryUtilization {utilization:g} gives vLLM {budget / GIB:.1f} GiB of "
                f"{where}; {model.get('model')}'s weights in {dtype} take {per_gpu / GIB:.1f} GiB per GPU "
                f"(over {tp * pp} GPU(s)): expected at least {per_gpu / (gpu.memory_gib * GIB):.2f} plus "
                "room for the KV cache",
                ("models", i, "gpuMemoryUtilization"),
                unconfirmed=_rests_on(weights, gpu),
            )
            continue
        tokens = model.get("maxModelLen") or weights.facts.config.get("max_position_embeddings")
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
            continue
        needed = kv_bytes_per_gpu(spec, kv_dtype_bytes(model, DTYPE_BYTES[dtype]), tokens, tp, pp)
        if budget - per_gpu < needed:
            # without maxModelLen vLLM derives the length from several config keys (the least of them, times
            # a rope scaling factor): max_position_embeddings alone may be more than it
            certain = bool(model.get("maxModelLen")) and _kv_arithmetic_is_a_lower_bound(
                model, weights.facts.config
            )
            yield Hit(
                f"models[{i}].gpuMemoryUtilization {utilization:g} gives vLLM {budget / GIB:.1f} GiB of "
                f"{where}: after {per_gpu / GIB:.1f} GiB of weights, {(budget - per_gpu) / GIB:.2f} GiB is "
                f"left, less than the {needed / GIB:.2f} GiB of KV cache one {tokens}-token sequence "
                "(maxModelLen) needs before activations; vLLM refuses a max-model-len its KV cache cannot "
                "hold at start: lower maxModelLen or spread the model over more GPUs",
                ("models", i, "gpuMemoryUtilization"),
                severity="error" if certain else "warning",
                unconfirmed=_rests_on(weights, gpu),
            )


def _kv_arithmetic_is_a_lower_bound(model: dict[str, Any], config: dict[str, Any]) -> bool:
    """Whether kv_bytes_per_gpu is at most what vLLM's _check_enough_kv_cache_memory asks for one
    max-model-len sequence, so that a shortfall is certain: a KV cache dtype of known size, no extraArgs that
    split the KV among ranks or fix its blocks, and a model whose layers are all full attention layers. (The
    budget side is an upper bound already: vLLM's KV memory is gpuMemoryUtilization x the GPU's memory less
    the weights, the activation peak and non-torch memory; the weights from the parameter count leave out
    norms and biases.)"""
    # every option of the pinned vLLM's, so that abbreviations and short forms (-dcp) resolve as vLLM's parser
    # resolves them, and --kv-cache-dtype stays itself beside --kv-cache-dtype-skip-layers
    view = extra_args(model, vllm_options.table().known)
    kv_dtype = (view.value("--kv-cache-dtype", "auto") or "auto").lower()
    if kv_dtype not in KNOWN_KV_DTYPES and not kv_dtype.startswith("fp8"):
        return False
    if any(setting.flag in KV_SPLITTING_FLAGS for setting in view.settings):
        return False
    if any(key in config for key in HYBRID_CONFIG_KEYS + SLIDING_CONFIG_KEYS):
        return False
    # Qwen2 and others name a window they do not use (use_sliding_window false)
    if config.get("sliding_window") and config.get("use_sliding_window", True) is not False:
        return False
    if any(key.startswith(("mamba", "ssm", "linear_")) for key in config):
        return False
    types = config.get("layer_types")
    return not (isinstance(types, list) and any(t not in ATTENTION_LAYER_TYPES for t in types))


# The least an engine needs before /health answers, besides reading the weights: importing vLLM and starting
# its engine core (40-90 s for the rig's tiny model on this project's CPU machines, tests/engine), and on a
# GPU the CUDA graph capture. Both figures are deliberately low: below them no machine starts the engine.
ENGINE_START_FLOOR_S = 30
WEIGHTS_READ_GIB_S = 4.0  # a fast local NVMe; a Hub download (source.huggingface) is slower still


def _startup_budget(values: dict[str, Any]) -> float | None:
    """Seconds the kubelet waits for the first successful startup probe before it restarts the container."""
    probe = lookup(values, "engine", "startupProbe")
    if not isinstance(probe, dict):
        return None
    period, failures = probe.get("periodSeconds", 10), probe.get("failureThreshold", 3)
    delay = probe.get("initialDelaySeconds", 0)
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (period, failures, delay)):
        return None  # the schema reports it
    return delay + period * failures


@rule(
    "startup-budget-fits-load",
    reason="the kubelet restarts an engine whose startup probe has not passed within initialDelaySeconds + "
    "failureThreshold x periodSeconds; a budget below what reading the weights and starting vLLM take "
    "restarts every engine before it serves, for ever (a warning: the floor assumes a fast disk)",
    remedy="raise engine.startupProbe.failureThreshold (the chart's default budget is 180 x 10 s)",
)
def startup_budget_fits_load(ctx: ValuesContext) -> Iterator[Hit]:
    budget = _startup_budget(ctx.values)
    if budget is None:
        return
    for i, model in model_entries(ctx.values):
        found = model_facts.find(model, ctx.model_configs)
        if found is None or _sizes_changed(model):
            continue
        spec = ModelSpec.from_hf_config(found.name, found.config, found.origin)
        weights_gib = spec.params * DTYPE_BYTES.get(_dtype(model), 2) / GIB
        floor = ENGINE_START_FLOOR_S + weights_gib / WEIGHTS_READ_GIB_S
        if budget < floor:
            yield Hit(
                f"engine.startupProbe gives each engine {budget:g} s to start; models[{i}] ({found.name}) "
                f"has {weights_gib:.1f} GiB of weights: at {WEIGHTS_READ_GIB_S:g} GiB/s and "
                f"{ENGINE_START_FLOOR_S} s for vLLM itself that is at least {floor:.0f} s",
                ("engine", "startupProbe"),
                severity="warning",
            )
