"""`kvtier plan`: KV bytes per token, tier capacities, L2 transfer times and TTFT cold vs L2 hit."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kvtier import cliopts, exitcodes
from kvtier.errors import UserError
from kvtier.plan import capacity, prefill, readspeed, report, result, scale
from kvtier.plan import inputs as plan_inputs
from kvtier.plan.facts import KNOWN_MODELS, REFERENCE
from kvtier.validate.inputs import loader, merge

# Scale defaults when the user gives none: a 25 Gbit/s NIC (common on GPU instances) and one NVMe drive's
# sequential read; both are printed as assumptions.
DEFAULT_NIC_GBPS = 25.0
DEFAULT_DISK_GIB_S = 2.0
_DEFAULTS: dict[str, Any] = {"replicas": [8, 16, 32, 64], "curvine_workers": [1, 2, 4, 8]}
SCALE_FLAGS = ("replicas", "curvine_workers", "worker_disk_gib_s", "nic_gbps", "replica_qps", "load")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "plan", help="size the KV tiers and predict L2 times and TTFT for an environment"
    )
    p.add_argument("file", nargs="?", type=Path, help="environment values file (models[], cache)")
    p.add_argument("--model-config", type=Path, help="Hugging Face config.json of the model (any model)")
    p.add_argument("--model", help=f"a shipped model instead of a values file ({', '.join(KNOWN_MODELS)})")
    p.add_argument("--dtype", default="float16", help="weights/KV dtype without a values file")
    p.add_argument(
        "--prompt-tokens",
        type=int,
        nargs="+",
        default=[1000, 2500, 3000],
        help="prompt lengths to predict for (tokens)",
    )
    p.add_argument(
        "--gpu-memory-gib", type=float, help="memory per GPU (GiB) when the instance type is unknown"
    )
    p.add_argument(
        "--activation-gib",
        type=float,
        default=0.0,
        help="GPU memory per GPU vLLM keeps for activations/CUDA graphs, taken off L0 (typically 1-4 GiB)",
    )
    p.add_argument("--l1-gib", type=float, default=0.0, help="L1 per replica (GiB) without a values file")
    p.add_argument("--l2-gib", type=float, default=0.0, help="L2 pool (GiB) without a values file")
    p.add_argument(
        "--backend",
        choices=("lmcache", "vllm-native"),
        default="lmcache",
        help="cache backend without a values file (its chunk file layout)",
    )
    p.add_argument("--chunk-size", type=int, default=256, help="tokens per chunk without a values file")
    p.add_argument("--write-gib-s", type=float, default=REFERENCE.l2_write_gib_s, help="L2 write GiB/s")
    p.add_argument(
        "--read-gib-s",
        type=float,
        help="L2 cross-node read GiB/s (default: Curvine's measured speed for the values' read settings, "
        f"tools/kvtier/facts/curvine_read.yaml; the reference's is {REFERENCE.l2_read_gib_s})",
    )
    p.add_argument(
        "--cold-ttft-ms", type=float, help="a measured cold TTFT (ms) to derive prefill throughput"
    )
    p.add_argument(
        "--cold-ttft-tokens",
        type=int,
        default=REFERENCE.ttft_tokens,
        help="prompt length of --cold-ttft-ms",
    )
    p.add_argument(
        "--prefill-tps", type=float, help="prefill throughput (tokens/s), instead of a measurement"
    )
    p.add_argument("--request-overhead-ms", type=float, help="per-request time caching does not remove")
    p.add_argument(
        "--hit-overhead-ms", type=float, help="fixed extra time of an L2 hit (lookups, file opens)"
    )
    p.add_argument(
        "--reference-check",
        action="store_true",
        help="compare predicted speedups with the reference deployment's measurements",
    )
    scale_group = p.add_argument_group(
        "scale on paper (--scale)",
        "the shared L2 at many replicas: the fleet QPS at which the Curvine pool saturates, the workers "
        "to size, and the chunk size trade-off, from a measured mix",
    )
    scale_group.add_argument(
        "--scale", action="store_true", help="print the scale table for each model (docs/performance.md)"
    )
    scale_group.add_argument(
        "--replicas",
        type=cliopts.counts,
        default=_DEFAULTS["replicas"],
        help="replica counts (default 8,16,32,64)",
    )
    scale_group.add_argument(
        "--curvine-workers",
        type=cliopts.counts,
        default=_DEFAULTS["curvine_workers"],
        help="Curvine worker counts (default 1,2,4,8)",
    )
    scale_group.add_argument(
        "--worker-disk-gib-s",
        type=float,
        help=f"one worker's NVMe read rate, GiB/s (default {DEFAULT_DISK_GIB_S}, assumed: measure with fio)",
    )
    scale_group.add_argument(
        "--nic-gbps",
        type=float,
        help=f"every node's NIC, Gbit/s (default {DEFAULT_NIC_GBPS}, assumed: your instance type's)",
    )
    scale_group.add_argument(
        "--replica-qps",
        type=float,
        help="one replica's measured throughput at your SLO (kvtier load); default: prefill-bound estimate",
    )
    scale_group.add_argument(
        "--load",
        type=Path,
        metavar="LOAD_JSON",
        help="the mix's shares from a `kvtier load` run (load.json); default: the real node's measured mix",
    )
    cliopts.add_output(p, json_alias=False)
    p.set_defaults(func=run)


def _spec(args: argparse.Namespace) -> capacity.ModelSpec | None:
    if args.model_config:
        return capacity.load_model_config(plan_inputs.model_source_path(args.model_config))
    if args.model:
        spec = capacity.known_model(args.model)
        if spec is None:
            raise UserError(
                f"--model {args.model!r} is not shipped ({', '.join(KNOWN_MODELS)}); "
                "use --model-config <config.json>"
            )
        return spec
    return None


def _positive(args: argparse.Namespace, *names: str) -> None:
    """Each of these optional number flags, when given, must be positive and finite."""
    for name in names:
        value = getattr(args, name)
        if value is not None and not 0 < value < float("inf"):
            raise UserError(f"--{name.replace('_', '-')} must be a positive number, got {value}")


def _speeds(args: argparse.Namespace, values: dict[str, Any] | None) -> list[result.ReadSpeed]:
    """The read speeds the plan compares; the last one is the one its tables use (--read-gib-s if given,
    else the measured one: docs/performance.md says why)."""
    measured = readspeed.measured_read(values)
    speeds = [
        result.ReadSpeed("reference", REFERENCE.l2_read_gib_s, readspeed.REFERENCE_SOURCE),
        result.ReadSpeed("measured", measured.gib_s, f"{measured.describe()}; {readspeed.MEASURE_YOURS}"),
    ]
    if args.read_gib_s is not None:
        speeds.append(result.ReadSpeed("given", args.read_gib_s, "--read-gib-s"))
    return speeds


def _timing(args: argparse.Namespace, read_gib_s: float) -> capacity.Timing:
    if args.chunk_size <= 0:
        raise UserError(f"--chunk-size must be positive, got {args.chunk_size}")
    _positive(args, "write_gib_s", "prefill_tps", "cold_ttft_ms")
    timing = capacity.reference_timing(read_gib_s, args.write_gib_s)
    if args.request_overhead_ms is not None or args.hit_overhead_ms is not None:
        timing = capacity.Timing(
            args.request_overhead_ms if args.request_overhead_ms is not None else timing.request_ms,
            args.hit_overhead_ms if args.hit_overhead_ms is not None else timing.hit_ms,
            timing.prefill_tps,
            timing.read_gib_s,
            timing.write_gib_s,
            "flags",
            reference_prefill=timing.reference_prefill,
        )
    if args.prefill_tps:
        timing = capacity.Timing(
            timing.request_ms,
            timing.hit_ms,
            args.prefill_tps,
            timing.read_gib_s,
            timing.write_gib_s,
            f"prefill {args.prefill_tps:g} tokens/s",
        )
    elif args.cold_ttft_ms:
        timing = capacity.calibrate(timing, args.cold_ttft_ms, args.cold_ttft_tokens)
    return timing


def _environment(path: Path) -> dict[str, Any]:
    """The file's effective values (chart defaults + the file), refused when the schema finds a wrong
    type or range: the planner reads numbers and sizes from them and must not guess."""
    from kvtier.validate import pipeline
    from kvtier.validate.findings import SCHEMA
    from kvtier.validate.options import Options

    loaded = loader.load(path)
    report = pipeline.check_loaded(loaded, Options(render=False))
    # Wrong types and out-of-range values would make wrong sizes; a missing key (the model's source,
    # say) is validate's business: the planner falls back to the chart's defaults for what it reads.
    errors = [
        f
        for f in report.findings
        if f.check == SCHEMA and f.severity == "error" and f.rule != "schema.required"
    ]
    if errors:
        shown = "; ".join(f"{f.location()}: {f.path or '(top level)'}: {f.message}" for f in errors[:3])
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        raise UserError(f"{shown}{more}; `kvtier validate {path}` lists every problem with its fix")
    return merge.effective(loaded.data)


def compute(args: argparse.Namespace) -> dict[str, Any]:
    _positive(args, "read_gib_s")
    spec = _spec(args)
    values: dict[str, Any] | None = None
    if args.file:
        values = _environment(args.file)
        inputs = plan_inputs.deployments(values, spec, args.gpu_memory_gib, str(args.file))
    elif spec:
        inputs = [
            (
                spec.name,
                plan_inputs.from_flags(
                    spec,
                    args.dtype,
                    args.gpu_memory_gib or 0.0,
                    args.l1_gib,
                    args.l2_gib,
                    args.backend,
                    args.chunk_size,
                ),
            )
        ]
    else:
        raise UserError("give a values FILE, --model NAME or --model-config config.json")
    if any(n <= 0 for n in args.prompt_tokens):
        raise UserError("--prompt-tokens must be positive")
    given = [f for f in SCALE_FLAGS if getattr(args, f) != _DEFAULTS.get(f)]
    if given and not args.scale:
        raise UserError(f"--{given[0].replace('_', '-')} only applies to the scale table: add --scale")
    speeds = _speeds(args, values)
    timing = _timing(args, speeds[-1].gib_s)
    out = result.build(
        inputs,
        timing,
        args.prompt_tokens,
        args.activation_gib,
        args.reference_check,
        speeds,
        f"{speeds[-1].name}: {speeds[-1].source}",
    )
    if args.scale:
        hardware, mix = _scale_inputs(args)
        for (_, deployment), entry in zip(inputs, out["models"], strict=True):
            entry["scale"] = scale.build(
                deployment,
                mix,
                prefill.timing_for(deployment, timing)[0],
                hardware,
                args.replicas,
                args.curvine_workers,
                args.replica_qps,
            )
    return out


def _scale_inputs(args: argparse.Namespace) -> tuple[scale.Hardware, scale.Mix]:
    _positive(args, "worker_disk_gib_s", "nic_gbps", "replica_qps")
    hardware = scale.Hardware(
        args.worker_disk_gib_s or DEFAULT_DISK_GIB_S,
        args.nic_gbps or DEFAULT_NIC_GBPS,
        assumed=args.worker_disk_gib_s is None or args.nic_gbps is None,
    )
    return hardware, scale.mix_from_load(args.load) if args.load else scale.shipped_mix()


def run(args: argparse.Namespace) -> int:
    result = compute(args)
    if args.output == "json":
        print(json.dumps(result, indent=2, default=str))
    else:
        report.print_table(result)
    return exitcodes.OK
