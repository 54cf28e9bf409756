"""`kvtier soak`: the load mix under faults on the CPU rig, every answer held to its reference."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from rich.console import Console

from kvtier import cliopts, exitcodes
from kvtier.engine_rig.errors import RigError
from kvtier.errors import UserError
from kvtier.load import experiment, soak, workload


def faults(text: str) -> list[str]:
    """An argparse type: comma-separated fault names (`--faults none,kill-engine`)."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in soak.FAULTS]
    if not names or unknown:
        said = f"{unknown[0]!r} is not a fault" if unknown else "no fault named"
        raise argparse.ArgumentTypeError(f"{said}; expected some of {','.join(soak.FAULTS)}")
    return names


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "soak",
        help="the load mix under faults on the CPU rig: failed requests, wrong answers (docs/reliability.md)",
        description="Each prompt's greedy reference from a replica without cache, then the mix through "
        "tiered replicas and router replicas while each fault is injected in turn. Exit 1 when an answer "
        "was wrong or a request failed that no dead engine explains.",
    )
    parser.add_argument(
        "--rig",
        action="store_true",
        help="start the replicas here (required: against a release the soak is not built yet)",
    )
    parser.add_argument("--faults", type=faults, default=list(soak.FAULTS), help="faults, in order")
    parser.add_argument("--requests", type=int, default=40, help="requests per fault (1-1000)")
    parser.add_argument("--qps", type=float, default=3.0, help="offered request rate")
    parser.add_argument("--replicas", type=int, default=3, help="engine replicas (2-4; one is killed)")
    parser.add_argument("--seed", type=int, default=0, help="the mix's seed")
    parser.add_argument(
        "--no-integrity", action="store_true", help="cache.l2.integrity off: see what changed chunks do"
    )
    parser.add_argument("--out", type=Path, default=Path("soak-results"), help="folder for soak.json")
    cliopts.add_output(parser, json_alias=False)
    parser.set_defaults(func=run)


def _checked(args: argparse.Namespace) -> workload.Mix:
    if not args.rig:
        raise UserError(
            "kvtier soak runs on the CPU rig: add --rig (it starts vLLM replicas here); against a release "
            "it is not built yet (docs/reliability.md)"
        )
    if not 1 <= args.requests <= 1000:
        raise UserError(f"--requests must be 1-1000, got {args.requests}")
    if not 0 < args.qps < float("inf"):
        raise UserError(f"--qps must be a positive number, got {args.qps}")
    if not 2 <= args.replicas <= 4:
        raise UserError(f"--replicas must be 2-4 (one is killed, one must stay), got {args.replicas}")
    try:
        return workload.Mix(
            requests=args.requests, max_prompt_tokens=experiment.RIG_MAX_PROMPT, seed=args.seed
        )
    except ValueError as error:
        raise UserError(f"the mix: {error}") from None


def run(args: argparse.Namespace) -> int:
    mix = _checked(args)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(f"--out {args.out}: cannot create the results folder ({error.strerror})") from None
    console = Console(stderr=True)
    try:
        with tempfile.TemporaryDirectory(prefix="kvtier-soak-") as work:
            rows = soak.run(
                args.faults, mix, args.qps, Path(work), lambda line: console.print(line, markup=False),
                replicas=args.replicas, integrity=not args.no_integrity,
            )  # fmt: skip
    except RigError as error:
        raise UserError(f"the soak stopped: {error}") from None
    (args.out / "soak.json").write_text(json.dumps(rows, indent=2) + "\n")
    if args.output == "json":
        print(json.dumps(rows, indent=2))
    else:
        print(soak.table(rows))
    console.print(f"results: {args.out}/soak.json")
    return exitcodes.OK if soak.clean(rows) else exitcodes.FINDINGS
