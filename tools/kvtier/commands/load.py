"""`kvtier load`: the multi-tenant mix, open-loop, through a release's router replicas, swept over QPS."""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rich.console import Console

from kvtier import cliopts, exitcodes
from kvtier.bench import run as bench_run
from kvtier.engine_rig import tiers
from kvtier.engine_rig.errors import RigError
from kvtier.errors import UserError
from kvtier.load import driver, experiment, plot, report, routing, workload
from kvtier.podscripts import kvcheck
from kvtier.smoke import reach

RIG_ROUTING = "prefixaware"  # the chart's routing.strategy default
ID_SPACE = 2**40  # fresh id bases: far apart (a run uses thousands of ids), exact as JSON numbers


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "load",
        help="throughput and tail latency under a multi-tenant mix (vLLM's `vllm bench serve`), QPS sweep",
        description="Replays a multi-tenant mix (Zipf-popular system prompts, growing chat sessions, one-off "
        "documents) open-loop with vLLM's own load generator, one client per router replica, and reports "
        "TTFT and ITL percentiles, throughput, goodput at a TTFT SLO and each tier's hit tokens from the "
        "engines' counters. Needs the engine venv (make engine), where `vllm bench serve` runs.",
    )
    urls = parser.add_argument_group("against URLs")
    urls.add_argument(
        "--router-url",
        type=cliopts.http_url,
        action="append",
        default=[],
        help="a router URL (repeat per replica)",
    )
    urls.add_argument(
        "--replica-url",
        type=cliopts.http_url,
        action="append",
        default=[],
        help="an engine URL, for hit counters",
    )
    reach.add_cluster_arguments(parser)
    rig = parser.add_argument_group("on this machine (CPU, no cluster)")
    rig.add_argument("--rig", action="store_true", help="start the CPU rig: 3 replicas and 2 router replicas")
    rig.add_argument(
        "--tiers", choices=tuple(tiers.TIER_SETS), help=f"--rig: tiers (default {tiers.ALL_TIERS})"
    )
    rig.add_argument("--routing", choices=routing.COMPARED, help=f"--rig: routing (default {RIG_ROUTING})")
    mix = parser.add_argument_group("the mix (docs/performance.md)")
    defaults = workload.Mix()
    mix.add_argument(
        "--qps", type=cliopts.rates, default=[1.0, 2.0, 4.0], help="offered request rates, swept"
    )
    mix.add_argument("--requests", type=int, default=defaults.requests, help="requests per QPS point")
    mix.add_argument("--system-prompts", type=int, default=defaults.system_prompts, help="tenants' prompts")
    mix.add_argument("--zipf", type=float, default=defaults.zipf_s, help="Zipf exponent of their popularity")
    mix.add_argument("--mean-turns", type=float, default=defaults.mean_turns, help="turns per chat session")
    mix.add_argument(
        "--document-share", type=float, default=defaults.document_share, help="one-off documents"
    )
    mix.add_argument(
        "--block-tokens", type=int, default=defaults.block_tokens, help="tokens per shared block"
    )
    mix.add_argument(
        "--max-prompt-tokens", type=int, default=defaults.max_prompt_tokens, help="context bound"
    )
    mix.add_argument("--output-tokens", type=int, default=defaults.output_tokens, help="tokens generated")
    mix.add_argument("--seed", type=int, default=defaults.seed, help="the mix's seed")
    mix.add_argument(
        "--id-base",
        type=int,
        help="first prompt block id (default: a fresh one per run, since L2 outlives runs and would serve "
        "an earlier run's prompts warm; load.json records it, give it to replay that run's exact prompts)",
    )
    parser.add_argument("--model", help="served model name (default: the first the router lists)")
    parser.add_argument("--tokenizer", help="tokenizer folder or Hugging Face id (default: --model)")
    parser.add_argument("--slo-ms", type=float, default=1000.0, help="TTFT SLO for goodput, ms")
    parser.add_argument(
        "--out", type=Path, default=Path("load-results"), help="folder for load.json, load.png"
    )
    cliopts.add_output(parser, json_alias=False)
    parser.set_defaults(func=run)


# Mix fields a flag sets -> the flag, so a refusal names what the user typed.
MIX_FLAGS = {
    "requests": "--requests", "system_prompts": "--system-prompts", "zipf_s": "--zipf",
    "mean_turns": "--mean-turns", "document_share": "--document-share", "block_tokens": "--block-tokens",
    "max_prompt_tokens": "--max-prompt-tokens", "output_tokens": "--output-tokens", "id_base": "--id-base",
}  # fmt: skip


def _mix(args: argparse.Namespace) -> workload.Mix:
    try:
        return workload.Mix(
            requests=args.requests, system_prompts=args.system_prompts, zipf_s=args.zipf,
            mean_turns=args.mean_turns, document_share=args.document_share, block_tokens=args.block_tokens,
            max_prompt_tokens=args.max_prompt_tokens, output_tokens=args.output_tokens, seed=args.seed,
            id_base=random.randrange(ID_SPACE) if args.id_base is None else args.id_base,
        )  # fmt: skip
    except ValueError as error:
        said = str(error)
        for name, flag in sorted(MIX_FLAGS.items(), key=lambda item: -len(item[0])):
            said = re.sub(rf"\b{name}\b", f"{flag} ({getattr(args, flag[2:].replace('-', '_'))})", said)
        raise UserError(f"the mix: {said}") from None


def run(args: argparse.Namespace) -> int:
    mix = _mix(args)
    if not args.slo_ms > 0:
        raise UserError(f"--slo-ms must be a positive number of milliseconds, got {args.slo_ms}")
    console = Console(stderr=True)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(f"--out {args.out}: cannot create the results folder ({error.strerror})") from None
    try:
        rows = _rig(args, mix, console) if args.rig else _release(args, mix, console)
    except RigError as error:
        raise UserError(f"the load run stopped: {error}") from None
    except kvcheck.CheckError as error:
        raise UserError(f"the load run stopped: {error}") from None
    payload: dict[str, Any] = {"mix": workload.describe(mix), "slo_ttft_ms": args.slo_ms, "rows": rows}
    (args.out / "load.json").write_text(json.dumps(payload, indent=2) + "\n")
    plot.curves(rows, args.slo_ms, args.out / "load.png")
    if args.output == "json":
        print(json.dumps(payload, indent=2))
    else:
        Console().print(report.table(rows, f"load, SLO TTFT <= {args.slo_ms:.0f} ms"))
    console.print(f"results: {args.out}/load.json, load.png")
    failed = sum(row["failed"] for row in rows)
    return exitcodes.OK if failed == 0 else exitcodes.FINDINGS


def _release(args: argparse.Namespace, mix: workload.Mix, console: Console) -> list[dict[str, Any]]:
    if args.tiers or args.routing:
        raise UserError("--tiers and --routing choose the rig's configuration: give --rig, or leave them out")
    with ExitStack() as stack:
        if args.router_url:
            if reach.cluster_flags_given(args):
                raise UserError(
                    f"{', '.join(reach.cluster_flags_given(args))} reach a cluster, --router-url names URLs: "
                    "give one kind"
                )
            routers, engines = list(args.router_url), list(args.replica_url)
        elif args.replica_url:
            raise UserError("--replica-url is read for counters only: give --router-url too")
        else:
            reached = reach.reach_from_args(args, stack, every_pod=True)
            routers, engines = reached.routers, reached.replicas
        for url in routers:  # before vLLM's clients start: a wrong URL is said in a second, not per request
            kvcheck.http_text(url.rstrip("/") + "/health", timeout=15)
        model = args.model or bench_run.resolve_model(routers[0])
        key = kvcheck.API_KEY or os.environ.get(reach.API_KEY_ENV)  # as kvtier smoke and bench find it
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        tokenizer = args.tokenizer or model
        offline = Path(tokenizer).is_dir()  # a local tokenizer: vLLM's clients never need the Hub
        target = driver.Target(routers, model, tokenizer, engines, headers, offline)
        prompts = experiment.FreshPrompts(mix)
        rows = []
        for qps in args.qps:
            row = experiment.measure(target, prompts, qps, args.out / "points", args.slo_ms)
            rows.append(row | {"tiers": "release", "routing": "release"})
            console.print(report.line(rows[-1]), markup=False)
        return rows


def _rig(args: argparse.Namespace, mix: workload.Mix, console: Console) -> list[dict[str, Any]]:
    if args.router_url or args.replica_url or reach.cluster_flags_given(args):
        raise UserError(
            "--rig starts its own replicas: leave out --router-url, --replica-url and the cluster flags"
        )
    configuration = (args.tiers or tiers.ALL_TIERS, args.routing or RIG_ROUTING)
    matrix = experiment.Matrix([configuration], args.qps, mix, args.slo_ms)
    with tempfile.TemporaryDirectory(prefix="kvtier-load-") as work:
        return experiment.run(matrix, Path(work), lambda line: console.print(line, markup=False))
