"""`kvtier bench`: TTFT sweep (cold / warm same replica / warm other replica), multi-turn, concurrency."""

from __future__ import annotations

import argparse
import json
import tempfile
from contextlib import ExitStack
from pathlib import Path

from rich.console import Console

from kvtier import cliopts, exitcodes
from kvtier.bench import methodology, report
from kvtier.bench import run as bench_run
from kvtier.engine_rig import tiers
from kvtier.engine_rig.errors import RigError
from kvtier.errors import UserError
from kvtier.podscripts import kvcheck
from kvtier.smoke import reach

MAX_TOKENS = 2**20  # longer than any served context; a typo (an extra 0s) would build a huge prompt


def _lengths(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected token counts like 500,1000,2000") from None
    if not values or min(values) < 2 or max(values) > MAX_TOKENS:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected token counts from 2 to {MAX_TOKENS} like 500,1000,2000"
        )
    return values


def _out_folder(out: Path) -> Path:
    """--out, created now: a bad folder is said before minutes of measuring, not after."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(
            f"--out {out}: cannot create the results folder ({error.strerror or error})"
        ) from None
    return out


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="TTFT by prompt length (cold, warm same replica, warm other replica), multi-turn, concurrency",
        description="The reference methodology, automated. Streaming TTFT is measured by this client; "
        "every request is bracketed by /metrics scrapes of each replica to attribute hits to tiers.",
    )
    urls = parser.add_argument_group("against URLs")
    urls.add_argument(
        "--router-url", type=cliopts.http_url, help="router URL (multi-turn and concurrency go through it)"
    )
    urls.add_argument(
        "--replica-url",
        type=cliopts.http_url,
        action="append",
        default=[],
        help="a replica URL (give two: A, B)",
    )
    reach.add_cluster_arguments(parser)
    rig = parser.add_argument_group("on this machine (CPU, no cluster)")
    rig.add_argument(
        "--rig",
        action="store_true",
        help="start two vLLM CPU replicas from values/cpu.yaml's rendered container (engine venv: "
        "make engine) and measure cold, L0, cross-replica L2 and recompute side by side",
    )
    rig.add_argument("--words", type=int, default=2000, help="--rig: words per prompt (about one token each)")
    rig.add_argument(
        "--backend",
        choices=("lmcache", tiers.NATIVE),
        default="lmcache",
        help="--rig: the cache backend the replicas render (cache.backend; docs/backends.md)",
    )
    parser.add_argument("--model", help="model name (default: the first one served)")
    parser.add_argument(
        "--lengths",
        type=_lengths,
        default=list(methodology.DEFAULT_LENGTHS),
        help="prompt lengths (tokens), comma-separated",
    )
    parser.add_argument("--repeats", type=int, default=3, help="fresh prompts per length (min/median/max)")
    parser.add_argument("--turns", type=int, default=4, help="multi-turn conversation turns (0 = skip)")
    parser.add_argument("--concurrency", type=int, default=0, help="simultaneous clients (0 = skip)")
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="folder for JSON, CSV, PNG")
    parser.add_argument(
        "--timeout", type=float, default=methodology.DEFAULT_TIMEOUT, help="seconds per request"
    )
    cliopts.add_output(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.repeats < 1 or args.turns < 0 or args.concurrency < 0:
        raise UserError("--repeats must be >= 1, --turns and --concurrency >= 0")
    if not args.timeout > 0:
        raise UserError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    if args.concurrency > 256:
        raise UserError(f"--concurrency {args.concurrency}: at most 256 simultaneous clients")
    console = Console(stderr=True)
    if args.rig:
        return _run_rig(args, console)
    with ExitStack() as stack:
        _out_folder(args.out)
        router, urls = _endpoints(args, stack)
        replicas = methodology.replicas_for(urls)
        plan = bench_run.BenchPlan(
            replicas, router, args.model, args.lengths, args.repeats, args.turns,
            concurrency=args.concurrency, out=args.out, timeout=args.timeout,
        )  # fmt: skip
        try:
            results = bench_run.execute(plan, console)
        except kvcheck.CheckError as error:
            raise UserError(f"benchmark stopped: {error}") from None
    if args.output == "json":
        print(json.dumps(results, indent=2))
    else:
        Console().print(report.table(results["summary"], f"TTFT ({results['model']})", results["skipped"]))
        if "multi_turn" in results:
            mt = results["multi_turn"]
            console.print(
                f"multi-turn ({args.turns} turns): {mt['uncached']['total_s']:.2f} s without reuse -> "
                f"{mt['cached']['total_s']:.2f} s with the cache ({mt['speedup']:.2f}x)"
            )
    console.print(f"results: {args.out}/bench.json, bench.csv, ttft.png")
    return exitcodes.OK


def _endpoints(args: argparse.Namespace, stack: ExitStack) -> tuple[str | None, list[str]]:
    """URL mode with --router-url/--replica-url; else the release in the kubeconfig's cluster."""
    if args.router_url or args.replica_url:
        if reach.cluster_flags_given(args):
            raise UserError(
                f"{', '.join(reach.cluster_flags_given(args))} reach a cluster, --router-url/--replica-url "
                "name URLs: give one kind"
            )
        if not args.replica_url:
            raise UserError(
                "--router-url needs --replica-url too (twice: replicas A and B), for the TTFT sweep"
            )
        return args.router_url, list(args.replica_url)
    reached = reach.reach_from_args(args, stack)
    return reached.router, reached.replicas


def _run_rig(args: argparse.Namespace, console: Console) -> int:
    """--rig: the L0/L1/L2 table of the tiered CPU rig, its JSON and its plot."""
    if args.replica_url or args.router_url or reach.cluster_flags_given(args):
        raise UserError(
            "--rig starts its own replicas: leave out --replica-url, --router-url and the cluster flags"
        )
    if not 300 <= args.words <= MAX_TOKENS:
        raise UserError(
            f"--words {args.words}: a prompt needs at least one whole chunk (use 300 to {MAX_TOKENS})"
        )
    _out_folder(args.out)

    def log(line: str) -> None:
        console.print(line, markup=False)

    try:
        with (
            tempfile.TemporaryDirectory(prefix="kvtier-tiers-") as work,
            tiers.TieredRig(Path(work), backend=args.backend, log=log) as rig,
        ):
            result = tiers.measure_tiers(rig, words=args.words, repeats=args.repeats)
    except (RigError, kvcheck.CheckError) as error:
        raise UserError(f"the CPU rig could not run: {error}") from None
    report.write_json(args.out / "tiers.json", result)
    report.plot_tiers(args.out / "tiers.png", result)
    if args.output == "json":
        print(json.dumps(result, indent=2))
    else:
        Console().print(report.tiers_table(result))
        console.print(report.tiers_summary(result))
    console.print(f"results: {args.out}/tiers.json, tiers.png")
    return exitcodes.OK
