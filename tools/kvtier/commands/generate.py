"""`kvtier generate`: write (or with --check, verify) every file derived from a single source."""

from __future__ import annotations

import argparse

from kvtier import exitcodes, paths
from kvtier.generate import derived, vllm_table


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "generate",
        help="write charts' values.schema.json, pod scripts and the vLLM options table from their sources",
    )
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if any file is stale")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.check:
        stale = derived.stale()
        for path in stale:
            print(f"{path.relative_to(paths.ROOT)} is stale: run `kvtier generate`")
        return exitcodes.FINDINGS if stale else exitcodes.OK
    for path in derived.write():
        print(f"wrote {path.relative_to(paths.ROOT)}")
    said = vllm_table.write()  # needs the engine venv: says so, and keeps the committed table, without it
    if said:
        print(said)
    return exitcodes.OK
