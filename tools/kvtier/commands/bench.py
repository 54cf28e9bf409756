"""`kvtier bench`: TTFT sweep (cold / warm same replica / warm other replica), multi-turn, concurrency."""

from __future__ import annotations

import argparse
import json
from contextlib import ExitStack
from pathlib import Path

from rich.console import Console

from kvtier import exitcodes
from kvtier.bench import methodology, report
from kvtier.bench import run as bench_run
from kvtier.errors import UserError
from kvtier.podscripts import kvcheck
from kvtier.smoke import reach


def _lengths(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected token counts like 500,1000,2000") from None
    if not values or min(values) < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive token counts like 500,1000,2000")
    return values


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="TTFT by prompt length (cold, warm same replica, warm other replica), multi-turn, concurrency",
        description="The reference methodology, automated. Streaming TTFT is measured by this client; "
        "every request is bracketed by /metrics scrapes of each replica to attribute hits to tiers.",
    )
    urls = parser.add_argument_group("against URLs")
    urls.add_argument("--router-url", help="router URL (multi-turn and concurrency go through it)")
    urls.add_argument("--replica-url", action="append", default=[], help="a replica URL (give two: A, B)")
    reach.add_cluster_arguments(parser)
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
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.repeats < 1 or args.turns < 0 or args.concurrency < 0:
        raise UserError("--repeats must be >= 1, --turns and --concurrency >= 0")
    console = Console(stderr=True)
    with ExitStack() as stack:
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
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        Console().print(report.table(results["summary"], f"TTFT ({results['model']})"))
        if "multi_turn" in results:
            mt = results["multi_turn"]
            console.print(
                f"multi-turn ({args.turns} turns): {mt['uncached']['total_s']:.2f} s without reuse -> "
                f"{mt['cached']['total_s']:.2f} s with the cache ({mt['speedup']:.2f}x)"
            )
    console.print(f"results: {args.out}/bench.json, bench.csv, ttft.png")
    return exitcodes.OK


def _endpoints(args: argparse.Namespace, stack: ExitStack) -> tuple[str | None, list[str]]:
    if args.kubeconfig:
        reached = reach.reach_from_args(args, stack)
        return reached.router, reached.replicas
    if not args.replica_url:
        raise UserError("give --replica-url (twice: replicas A and B) or --kubeconfig")
    return args.router_url, list(args.replica_url)
