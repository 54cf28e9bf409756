"""Cross-field rules that hold each model's engine arguments against the model and the pinned vLLM and
LMCache: what vLLM refuses only once the model's config.json is read (or the weights are loaded).

Facts from the pinned versions' code (toolchain/versions.env; docs/validate.md cites the lines):
- vLLM refuses a tensor parallel size that does not divide the attention heads (ModelConfig's
  verify_with_parallel_config); the model code asserts that KV heads and TP divide one another.
- vLLM refuses --max-model-len above the model's position limit (max_position_embeddings and its kin),
  unless VLLM_ALLOW_LONG_MAX_MODEL_LEN is set.
- vLLM CPU's attention backend takes block sizes that are multiples of 32 only, and fails after the
  weights load otherwise; LMCache's multi-process adapter refuses a chunk size that is not a multiple
  of vLLM's block size (the in-process connector has no such check), and so does vLLM's native offloading
  (vllm/v1/kv_offload: the offloading block_size must be a multiple of the KV cache block size).
- Tensor parallel ranks in one pod create NCCL shared-memory segments and vLLM's worker message queues in
  /dev/shm, which the chart sizes from engine.shmSize: below 1Gi the segments cannot be created.
Model facts come from --model-config, a local model folder, the Hub, the local Hugging Face cache or the
shipped configs (kvtier.validate.model_facts); facts from neither the Hub nor the user's file, and a model
with none, are said so (model-facts-source), never passed in silence.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kvtier import quantity
from kvtier.validate import model_facts
from kvtier.validate.rules import Hit, ValuesContext, rule
from kvtier.values import extra_args, lookup, model_entries, tensor_parallel_arg

CPU_BLOCK_MULTIPLE = 32  # vllm/v1/attention/backends/cpu_attn.py: MultipleOf(32)
GPU_DEFAULT_BLOCK_SIZE = 16  # vllm/config/cache.py: CacheConfig.DEFAULT_BLOCK_SIZE
CPU_DEFAULT_BLOCK_SIZE = 128  # vllm/platforms/cpu.py, when --block-size is not given
# The position keys vLLM reads for a model's limit (the smallest counts; vllm/config/model.py).
POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "max_sequence_length")


def _tensor_parallel(model: dict[str, Any]) -> int | None:
    text = tensor_parallel_arg(model) or model.get("gpusPerReplica", 1)
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


# The rules that read a model's config.json (kvtier.validate.model_facts), and pass a model it lacks.
MODEL_FACT_RULES = (
    "tp-divides-heads",
    "max-model-len-within-model",
    "gpu-memory-holds-weights",
    "weights-fit-instance-gpus",
    "dtype-supported-by-model",
    "gated-model-needs-token",
    "startup-budget-fits-load",
)
# rope_scaling types vLLM keeps the position limit of: the others multiply it by their factor (vLLM's
# ModelConfig, _get_and_verify_max_len), which this check does not reproduce, so it leaves them unjudged.
UNSCALED_ROPE = ("default", "llama3", "longrope", "su", "mrope")


def context_limit(config: dict[str, Any]) -> int | None:
    """The most positions vLLM accepts for --max-model-len from a config.json; None where rope scaling
    changes it."""
    rope = config.get("rope_scaling")
    rope = rope if isinstance(rope, dict) else {}
    kind = str(rope.get("rope_type") or rope.get("type") or "default")
    if rope.get("factor") and kind not in UNSCALED_ROPE:
        return None
    limits = [int(config[k]) for k in POSITION_KEYS if isinstance(config.get(k), int) and config[k] > 0]
    return min(limits) if limits else None


@rule(
    "model-facts-source",
    reason="vLLM reads the model's config.json from the Hub at the pinned revision; validate's rules over "
    "heads, position limit, weights, dtype and the licence gate judge with what it could get, and say here "
    "where that was when it was not the Hub or a file the user named: the local cache may hold another "
    "revision, the shipped facts a figure not confirmed, and with nothing the rules that need the facts "
    "cannot check the model (they pass it, never in silence)",
    remedy=f"{model_facts.HOW_TO_SUPPLY}; or check gpusPerReplica, maxModelLen, dtype and the token against "
    "the model's config.json by hand",
)
def model_facts_source(ctx: ValuesContext) -> Iterator[Hit]:
    for i, model in model_entries(ctx.values):
        name = model.get("model")
        if not isinstance(name, str) or not name:
            continue
        seen = model_facts.look_up(model, ctx.model_configs)
        found = seen.facts
        if found is not None and found.kind not in ("cache", "shipped"):
            continue  # the Hub, or a file the user named: what vLLM would read
        why = _why_not_the_hub(seen)
        if found is None:
            used = (
                f"validate has no config.json for it ({why}; not in the local Hugging Face cache "
                f"{model_facts.hub_cache()}; not shipped; no --model-config), so "
                f"{', '.join(MODEL_FACT_RULES)} cannot check its heads, context length, weights, dtype or "
                "gating"
            )
        elif found.kind == "cache":
            used = f"its facts come from the local Hugging Face cache, {found.origin} ({why})"
        else:
            used = f"its facts come from kvtier's shipped {_shipped(found)} ({why})"
        yield Hit(
            f"models[{i}] ({name}): {used}; {model_facts.HOW_TO_SUPPLY}",
            ("models", i, "model"),
            severity="warning",
        )


def _why_not_the_hub(seen: model_facts.Lookup) -> str:
    if seen.hub is None:
        return "the Hub was not asked"
    if seen.hub_unreadable:
        return f"the Hub's {seen.hub.url} cannot be read: {seen.hub_unreadable}"
    return seen.hub.why_not()


def _shipped(found: model_facts.ModelFacts) -> str:
    where = f"tools/kvtier/facts/models/{found.name}.yaml"
    if "*" in found.unconfirmed:
        return f"{where}, not confirmed against the published config.json"
    if found.unconfirmed:
        return f"{where}, confirmed but for {', '.join(sorted(found.unconfirmed))}"
    return f"{where}, confirmed against the published config.json"


@rule(
    "tp-divides-heads",
    reason="vLLM splits attention heads evenly over the tensor parallel ranks: a size that does not divide "
    "them (or the KV heads) is refused once the model's config is read, and the pod restarts for ever",
    remedy="choose gpusPerReplica (the tensor parallel size) among the divisors of the model's attention "
    "and KV head counts",
)
def tp_divides_heads(ctx: ValuesContext) -> Iterator[Hit]:
    for i, model in model_entries(ctx.values):
        found = model_facts.find(model, ctx.model_configs)
        tp = _tensor_parallel(model)
        if not found or not tp or tp <= 1:
            continue
        name, config = found.name, found.config
        heads = int(config["num_attention_heads"])
        kv = int(config.get("num_key_value_heads") or heads)
        if heads % tp:
            yield Hit(
                f"models[{i}] tensor parallel size {tp} does not divide {name}'s {heads} attention heads",
                ("models", i, "gpusPerReplica"),
                unconfirmed=found.rests_on("num_attention_heads"),
            )
        elif (kv % tp) if kv >= tp else (tp % kv):
            yield Hit(
                f"models[{i}] tensor parallel size {tp} and {name}'s {kv} KV heads do not divide one another",
                ("models", i, "gpusPerReplica"),
                unconfirmed=found.rests_on("num_attention_heads", "num_key_value_heads"),
            )


@rule(
    "parallel-fits-gpus",
    reason="vLLM runs tensor x pipeline parallel ranks, one GPU each; the chart gives every GPU of the pod "
    "to tensor parallelism (--tensor-parallel-size = gpusPerReplica), so a --pipeline-parallel-size above "
    '1 asks for more GPUs than the pod has, and vLLM refuses to start ("World size ... is larger than the '
    'number of available GPUs ... in this node")',
    remedy="remove --pipeline-parallel-size from extraArgs (or set it to 1) and give the model's GPUs "
    "through gpusPerReplica",
)
def parallel_fits_gpus(ctx: ValuesContext) -> Iterator[Hit]:
    # The pinned vLLM's vllm/config/parallel.py, ParallelConfig.__post_init__: world_size = pipeline x
    # tensor parallel size; with no executor backend chosen and fewer CUDA devices on the node, a
    # ValueError (vLLM PR #25775 removed the fall-back to Ray that older releases made).
    if lookup(ctx.values, "engine", "accelerator") == "cpu":
        return  # vLLM's CPU build runs ranks as processes, not one per GPU
    for i, model in model_entries(ctx.values):
        setting = extra_args(model).last("--pipeline-parallel-size")
        gpus = model.get("gpusPerReplica", 1)
        if setting is None or not str(setting.value or "").isdigit() or not isinstance(gpus, int):
            continue  # unset, or a value vLLM's parser refuses (engine-args-parse)
        pp = int(str(setting.value))
        if pp > 1:
            yield Hit(
                f"models[{i}] extraArgs[{setting.index}] {setting.item!r} asks for pipeline parallel size "
                f"{pp}: {gpus} (tensor) x {pp} (pipeline) = {gpus * pp} GPU ranks, and the pod gets "
                f"gpusPerReplica {gpus} GPU(s)",
                ("models", i, "extraArgs", setting.index),
            )


def _allows_long_context(values: dict[str, Any]) -> bool:
    for env in lookup(values, "engine", "extraEnv", default=[]) or []:
        if isinstance(env, dict) and env.get("name") == "VLLM_ALLOW_LONG_MAX_MODEL_LEN":
            return str(env.get("value", "")).lower() in ("1", "true")
    return False


@rule(
    "max-model-len-within-model",
    reason="vLLM refuses a --max-model-len above the model's position limit when it reads the model's "
    "config: the engine never starts",
    remedy="keep models[].maxModelLen at or below the model's max_position_embeddings (or set "
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 in engine.extraEnv when the model's rope scaling really allows more)",
)
def max_model_len_within_model(ctx: ValuesContext) -> Iterator[Hit]:
    if _allows_long_context(ctx.values):
        return
    for i, model in model_entries(ctx.values):
        found = model_facts.find(model, ctx.model_configs)
        length = model.get("maxModelLen")
        if not found or not isinstance(length, int) or isinstance(length, bool):
            continue
        limit = context_limit(found.config)
        if limit and length > limit:
            yield Hit(
                f"models[{i}].maxModelLen {length} is above {found.name}'s limit of {limit} positions "
                f"(config.json max_position_embeddings, from {found.origin})",
                ("models", i, "maxModelLen"),
                unconfirmed=found.rests_on(*POSITION_KEYS, "rope_scaling"),
            )


def _block_size(model: dict[str, Any], default: int) -> int | None:
    text = extra_args(model).value("--block-size")
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        return None  # vLLM's own parser reports it


@rule(
    "block-size-supported",
    reason="vLLM CPU runs block sizes that are multiples of 32 only (it fails after loading the weights); "
    "LMCache's multi-process server and vLLM's native offloading refuse a chunk size that is not a multiple "
    "of the block size",
    remedy="drop --block-size from extraArgs (the defaults fit), or use a multiple of 32 on CPU and a "
    "divisor of cache.chunkSize",
)
def block_size_supported(ctx: ValuesContext) -> Iterator[Hit]:
    cpu = (
        ctx.values.get("target", "standalone") == "standalone"
        and lookup(ctx.values, "engine", "accelerator") == "cpu"
    )
    multiprocess = (
        ctx.values.get("target") == "hyperpod"
        and lookup(ctx.values, "hyperpod", "lmcache", "mode") == "MultiProcess"
    )
    native = (
        ctx.values.get("target", "standalone") == "standalone"
        and lookup(ctx.values, "cache", "backend") == "vllm-native"
    )
    chunk = lookup(ctx.values, "cache", "chunkSize")
    for i, model in model_entries(ctx.values):
        block = _block_size(model, CPU_DEFAULT_BLOCK_SIZE if cpu else GPU_DEFAULT_BLOCK_SIZE)
        if not block or block <= 0:
            continue
        if cpu and block % CPU_BLOCK_MULTIPLE:
            given = extra_args(model).last("--block-size")
            yield Hit(
                f"models[{i}] --block-size {block} is not a multiple of {CPU_BLOCK_MULTIPLE} (vLLM CPU)",
                ("models", i, "extraArgs", *([given.index] if given else [])),
            )
        if (multiprocess or native) and isinstance(chunk, int) and chunk % block:
            yield Hit(
                f"cache.chunkSize {chunk} is not a multiple of models[{i}]'s block size {block}",
                ("cache", "chunkSize"),
            )


MIN_TP_SHM = quantity.parse("1Gi")


@rule(
    "tp-shm-size",
    reason="tensor parallel ranks in one pod talk through /dev/shm (NCCL's shared-memory transport where "
    "the GPUs have no NVLink/P2P, vLLM's worker message queues): a /dev/shm below 1Gi fails NCCL's segment "
    "creation and the engine dies at start (vllm-project/production-stack#276)",
    remedy="keep engine.shmSize at 1Gi or more when any model has gpusPerReplica > 1 (the chart's default "
    "8Gi fits; vLLM's docs ask for --ipc=host or a large --shm-size for tensor parallel)",
)
def tp_shm_size(ctx: ValuesContext) -> Iterator[Hit]:
    # The chart mounts a memory emptyDir of engine.shmSize (plus the native CPU tier, which fills its own
    # part) on /dev/shm of each engine pod (templates/engine-deployment.yaml, _cache.tpl shmSizeLimit).
    # NCCL (src/transport/shm.cc) and vLLM's MessageQueue (distributed/device_communicators/
    # shm_broadcast.py) create their segments there, per pair of ranks; with less room the creation fails.
    if (
        ctx.values.get("target", "standalone") != "standalone"
        or lookup(ctx.values, "engine", "accelerator") == "cpu"
    ):
        return  # HyperPod's operator sizes the pod; the chart refuses gpusPerReplica > 1 on CPU itself
    size = lookup(ctx.values, "engine", "shmSize")
    shm = quantity.try_parse(size) if size is not None else None
    if shm is None or shm >= MIN_TP_SHM:
        return  # absent or not a quantity: the chart default (8Gi) applies, or the schema reports it
    wide = [(i, m.get("gpusPerReplica")) for i, m in model_entries(ctx.values)]
    wide = [(i, g) for i, g in wide if isinstance(g, int) and not isinstance(g, bool) and g > 1]
    if wide:
        who = ", ".join(f"models[{i}] ({g} GPUs)" for i, g in wide)
        yield Hit(
            f"engine.shmSize {size} is below 1Gi, too small for tensor parallel across GPUs in one pod "
            f"({who}); set engine.shmSize to 1Gi or more (the default is 8Gi)",
            ("engine", "shmSize"),
        )
