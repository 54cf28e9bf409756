"""The scheduler budget vLLM checks at start-up (vllm/config/scheduler.py,
SchedulerConfig.verify_max_model_len, run from __post_init__ with the model's max_model_len), with the
defaults it fills in first (vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults and
_set_default_max_num_seqs_and_batched_tokens_args):

- with chunked prefill off, max_num_batched_tokens below max_model_len is refused;
- max_num_batched_tokens below max_num_seqs is refused;
- max_num_active_seqs above max_num_seqs is refused;
- long_prefill_token_threshold above max_model_len is refused.

An unset --max-num-batched-tokens becomes the usage default for `vllm serve` (2048 below 70 GiB of GPU memory
or on an A100, 8192 from 70 GiB, 16384 from 160 GiB; 2048 x world size on CPU; doubled under
`--performance-mode throughput`), raised to max_model_len with chunked prefill off, then capped at
max_num_seqs x max_model_len; so with --max-num-seqs set alone the budget is refused when the default is
below it, which depends on the GPU. Likewise an unset --max-num-seqs becomes 256 (below 70 GiB or on an A100),
1024 (from 70 GiB), 128 x world size on CPU, doubled under throughput mode, and a --max-num-active-seqs
above it is refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kvtier.upstream import vllm_args, vllm_options
from kvtier.validate import model_facts
from kvtier.validate.checks.engine_rules import context_limit
from kvtier.validate.checks.gpu_rules import gpu_of
from kvtier.validate.rules import Hit, ValuesContext, rule
from kvtier.values import extra_args, lookup, model_entries

GIB_70, GIB_160 = 70, 160  # get_batch_defaults' device memory steps, GiB
# OPENAI_API_SERVER defaults by GPU memory: (floor GiB, max_num_batched_tokens, max_num_seqs).
SERVER_DEFAULTS = ((GIB_160, 16384, 1024), (GIB_70, 8192, 1024), (0, 2048, 256))
SERVER_BUDGET = tuple((floor, tokens) for floor, tokens, _ in SERVER_DEFAULTS)
SERVER_SEQS = tuple((floor, seqs) for floor, _, seqs in SERVER_DEFAULTS)
CPU_BUDGET_PER_RANK, CPU_SEQS_PER_RANK = 2048, 128


@dataclass(frozen=True)
class Budget:
    """One model's scheduler settings as vLLM ends up with them (None: not set in extraArgs)."""

    batched: int | None
    seqs: int | None
    active: int | None
    threshold: int | None
    chunked: bool | None  # None: set by the model's runner, not known here
    throughput: bool
    world: int
    view: vllm_args.Argv


def _int(view: vllm_args.Argv, flag: str) -> int | None:
    text = view.value(flag)
    option = vllm_options.table().by_string.get(flag)
    if text is None or option is None:
        return None
    try:
        value = vllm_options.convert(option, text)
    except (ValueError, TypeError):
        return None  # vllm-arg-invalid reports it
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _world(model: dict[str, Any], view: vllm_args.Argv) -> int:
    try:
        tp = int(view.value("--tensor-parallel-size") or model.get("gpusPerReplica") or 1)
        pp = int(view.value("--pipeline-parallel-size") or 1)
    except (TypeError, ValueError):
        return 1
    return max(tp, 1) * max(pp, 1)


def budget(model: dict[str, Any]) -> Budget:
    view = extra_args(model, vllm_options.table().known)
    last = view.last("--enable-chunked-prefill")
    # `--enable-chunked-prefill=false` is refused by argparse (a boolean takes no value): vllm-arg-invalid's
    chunked_text = last.value if last and "=" not in last.item else None
    # Pooling runners take their chunked-prefill default from the model
    # (ModelConfig.is_chunked_prefill_supported); a generating model's default is on.
    pooling = view.value("--runner") == "pooling" or view.value("--convert") not in (None, "none", "auto")
    chunked = None if pooling else True
    if chunked_text is not None:
        chunked = chunked_text.lower() == "true"
    return Budget(
        _int(view, "--max-num-batched-tokens"),
        _int(view, "--max-num-seqs"),
        _int(view, "--max-num-active-seqs"),
        _int(view, "--long-prefill-token-threshold"),
        chunked,
        view.value("--performance-mode") == "throughput",
        _world(model, view),
        view,
    )


def _max_model_len(model: dict[str, Any], ctx: ValuesContext) -> tuple[int | None, str]:
    """The max_model_len vLLM checks against (the chart's --max-model-len, else the model's limit) and
    where it comes from."""
    length = model.get("maxModelLen")
    if isinstance(length, int) and not isinstance(length, bool):
        return length, "maxModelLen"
    found = model_facts.find(model, ctx.model_configs)
    limit = context_limit(found.config) if found else None
    return (limit, f"{found.name}'s context length (maxModelLen unset)") if found and limit else (None, "")


def _encoder_decoder(model: dict[str, Any], ctx: ValuesContext) -> bool:
    found = model_facts.find(model, ctx.model_configs)
    return bool(found and found.config.get("is_encoder_decoder"))  # vLLM turns chunked prefill off there


def server_defaults(
    values: dict[str, Any], model: dict[str, Any], b: Budget
) -> tuple[tuple[int, int] | None, str]:
    """vLLM's default (max_num_batched_tokens, max_num_seqs) for this engine before its max_model_len
    adjustments, each doubled in throughput mode, and the fact they rest on; None where the GPU is not
    known."""
    factor = 2 if b.throughput else 1
    if lookup(values, "engine", "accelerator") == "cpu" and values.get("target", "standalone") != "hyperpod":
        per_rank = (CPU_BUDGET_PER_RANK * b.world * factor, CPU_SEQS_PER_RANK * b.world * factor)
        return per_rank, f"CPU, world size {b.world}"
    gpu = gpu_of(values, model)
    if gpu is None:
        return None, ""
    for floor, tokens, seqs in SERVER_DEFAULTS:
        if gpu.memory_gib >= floor and not (floor and "a100" in gpu.model.lower()):
            return (
                tokens * factor,
                seqs * factor,
            ), f"{gpu.instance_type}'s {gpu.memory_gib:g} GiB {gpu.model}"
    return None, ""  # unreachable: the last step's floor is 0


def default_budget(values: dict[str, Any], model: dict[str, Any], b: Budget) -> tuple[int | None, str]:
    """vLLM's default max_num_batched_tokens for this engine, and the fact it rests on (server_defaults)."""
    found, fact = server_defaults(values, model, b)
    return (found[0] if found else None), fact


@rule(
    "vllm-scheduler-budget",
    reason="vLLM's SchedulerConfig refuses at start-up a token budget (max_num_batched_tokens, set or "
    "defaulted by GPU) below max_num_seqs, or below max_model_len with chunked prefill off, a "
    "max_num_active_seqs above max_num_seqs (set or defaulted by GPU) and a long_prefill_token_threshold "
    "above max_model_len (vllm/config/scheduler.py, verify_max_model_len): the engine exits and the pod "
    "crash-loops",
    remedy="raise --max-num-batched-tokens (or lower --max-num-seqs / models[].maxModelLen), or keep "
    "chunked prefill on; set --max-num-batched-tokens explicitly when setting --max-num-seqs above 2048",
)
def scheduler_budget(ctx: ValuesContext) -> Iterator[Hit]:
    for i, model in model_entries(ctx.values):
        if _encoder_decoder(model, ctx):
            continue
        b = budget(model)
        length, length_from = _max_model_len(model, ctx)
        yield from _hits(ctx.values, i, model, b, length, length_from)


def _at(b: Budget, i: int, flag: str) -> tuple[Any, ...]:
    found = b.view.last(flag)
    return ("models", i, "extraArgs", found.index) if found else ("models", i, "extraArgs")


def _hits(
    values: dict[str, Any], i: int, model: dict[str, Any], b: Budget, length: int | None, length_from: str
) -> Iterator[Hit]:
    where = f"models[{i}].extraArgs"
    if b.batched is not None and length is not None and b.chunked is False and b.batched < length:
        yield Hit(
            f"{where}: --max-num-batched-tokens {b.batched} is below max_model_len {length} ({length_from}) "
            "with chunked prefill off: vLLM refuses to start",
            _at(b, i, "--max-num-batched-tokens"),
        )
    seqs_default = b.seqs is None
    if b.batched is not None and b.seqs is not None and b.batched < b.seqs:
        yield Hit(
            f"{where}: --max-num-batched-tokens {b.batched} is below --max-num-seqs {b.seqs}: vLLM refuses "
            "to start (each scheduled sequence needs at least one token of the budget)",
            _at(b, i, "--max-num-batched-tokens"),
        )
    elif b.batched is None and b.seqs is not None:
        yield from _defaulted_budget(values, i, model, b, length)
    if b.active is not None and not seqs_default and b.seqs is not None and b.active > b.seqs:
        yield Hit(
            f"{where}: --max-num-active-seqs {b.active} is above --max-num-seqs {b.seqs}: vLLM refuses "
            "to start",
            _at(b, i, "--max-num-active-seqs"),
        )
    elif b.active is not None and seqs_default:
        yield from _active_over_default(values, i, model, b)
    if b.threshold is not None and length is not None and b.threshold > length:
        yield Hit(
            f"{where}: --long-prefill-token-threshold {b.threshold} is above max_model_len {length} "
            f"({length_from}): vLLM refuses to start",
            _at(b, i, "--long-prefill-token-threshold"),
        )


def _active_over_default(values: dict[str, Any], i: int, model: dict[str, Any], b: Budget) -> Iterator[Hit]:
    """--max-num-active-seqs set, --max-num-seqs left to vLLM's default (get_batch_defaults): refused when
    above that default, which depends on the GPU's memory (or the CPU's world size)."""
    assert b.active is not None
    at = _at(b, i, "--max-num-active-seqs")
    found, fact = server_defaults(values, model, b)
    if found is not None:
        if b.active > found[1]:
            yield Hit(
                f"models[{i}].extraArgs: --max-num-active-seqs {b.active} is above vLLM's default "
                f"max_num_seqs {found[1]} on {fact} (--max-num-seqs unset): vLLM refuses to start",
                at,
            )
        return
    factor = 2 if b.throughput else 1
    smallest, largest = min(s for _, s in SERVER_SEQS) * factor, max(s for _, s in SERVER_SEQS) * factor
    if b.active > largest:
        yield Hit(
            f"models[{i}].extraArgs: --max-num-active-seqs {b.active} is above vLLM's largest default "
            f"max_num_seqs {largest} (--max-num-seqs unset): vLLM refuses to start",
            at,
        )
    elif b.active > smallest:
        yield Hit(
            f"models[{i}].extraArgs: --max-num-active-seqs {b.active} with --max-num-seqs unset: vLLM's "
            f"default max_num_seqs depends on the GPU's memory ({smallest} below 70 GiB or on an A100, "
            f"{largest} from 70 GiB) and it refuses to start when that is below {b.active}; the instance "
            "type's GPU is not known here (check it with `nvidia-smi --query-gpu=name,memory.total "
            "--format=csv` on the node), or set --max-num-seqs",
            at,
            severity="warning",
        )


def _defaulted_budget(
    values: dict[str, Any], i: int, model: dict[str, Any], b: Budget, length: int | None
) -> Iterator[Hit]:
    """--max-num-seqs set, --max-num-batched-tokens left to vLLM's default: refused when the default (raised
    to max_model_len with chunked prefill off) is below max_num_seqs."""
    assert b.seqs is not None
    if b.chunked is None or (b.chunked is False and length is None):
        return  # the floor vLLM raises the default to is not known here
    floor = length if b.chunked is False and length is not None else 0
    tokens, fact = default_budget(values, model, b)
    at = _at(b, i, "--max-num-seqs")
    if tokens is not None:
        if max(tokens, floor) < b.seqs:
            yield Hit(
                f"models[{i}].extraArgs: --max-num-seqs {b.seqs} is above vLLM's default token budget "
                f"{max(tokens, floor)} on {fact} (--max-num-batched-tokens unset): vLLM refuses to start",
                at,
            )
        return
    factor = 2 if b.throughput else 1
    smallest, largest = SERVER_BUDGET[-1][1] * factor, SERVER_BUDGET[0][1] * factor
    if max(largest, floor) < b.seqs:
        yield Hit(
            f"models[{i}].extraArgs: --max-num-seqs {b.seqs} is above vLLM's largest default token budget "
            f"{largest} (--max-num-batched-tokens unset): vLLM refuses to start",
            at,
        )
    elif max(smallest, floor) < b.seqs:
        yield Hit(
            f"models[{i}].extraArgs: --max-num-seqs {b.seqs} with --max-num-batched-tokens unset: vLLM's "
            f"default budget depends on the GPU's memory ({smallest} below 70 GiB or on an A100, 8192 "
            f"from 70 GiB, {largest} from 160 GiB) and it refuses to start when that is below "
            f"{b.seqs}; the instance type's GPU is not known here (check it with `nvidia-smi "
            "--query-gpu=name,memory.total --format=csv` on the node), or set --max-num-batched-tokens",
            at,
            severity="warning",
        )
