"""`kvtier plan`: KV bytes per token, tier capacities, L2 transfer times and TTFT cold vs L2 hit."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kvtier import cliopts, exitcodes
from kvtier.errors import UserError
from kvtier.plan import capacity, report, result
from kvtier.plan import inputs as plan_inputs
from kvtier.plan.facts import KNOWN_MODELS, REFERENCE
from kvtier.validate.inputs import loader, merge


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
        "--read-gib-s", type=float, default=REFERENCE.l2_read_gib_s, help="L2 cross-node read GiB/s"
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


def _timing(args: argparse.Namespace) -> capacity.Timing:
    if args.chunk_size <= 0:
        raise UserError(f"--chunk-size must be positive, got {args.chunk_size}")
    for name in ("write_gib_s", "read_gib_s", "prefill_tps", "cold_ttft_ms"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise UserError(f"--{name.replace('_', '-')} must be positive, got {value}")
    timing = capacity.reference_timing(args.read_gib_s, args.write_gib_s)
    if args.request_overhead_ms is not None or args.hit_overhead_ms is not None:
        timing = capacity.Timing(
            args.request_overhead_ms if args.request_overhead_ms is not None else timing.request_ms,
            args.hit_overhead_ms if args.hit_overhead_ms is not None else timing.hit_ms,
            timing.prefill_tps,
            timing.read_gib_s,
            timing.write_gib_s,
            "flags",
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
    spec = _spec(args)
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
    return result.build(inputs, _timing(args), args.prompt_tokens, args.activation_gib, args.reference_check)


def run(args: argparse.Namespace) -> int:
    result = compute(args)
    if args.output == "json":
        print(json.dumps(result, indent=2, default=str))
    else:
        report.print_table(result)
    return exitcodes.OK
