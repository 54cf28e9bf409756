"""The `kvtier` command line: one subcommand per user step.

Each module in `kvtier.commands` that defines `register(subparsers)` adds one subcommand named like
the module; the handler it sets (`func`) returns an exit code. Adding a step never touches this file.
Only the chosen command's module is imported (some pull in the Kubernetes client, ~0.4 s), except
for `kvtier --help`, which lists them all.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence

import kvtier
from kvtier import commands, exitcodes
from kvtier.errors import UserError


class _Version(argparse.Action):
    """Prints the version only when asked (the lookup reads package metadata: ~40 ms per run)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"kvtier {kvtier.__version__}")
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every command, or with just `only` when that names a command module."""
    parser = argparse.ArgumentParser(
        prog="kvtier",
        description="Validate, size, check and exercise the tiered KV-cache inference bundle.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    names = sorted(m.name for m in pkgutil.iter_modules(commands.__path__))
    if only in names:
        names = [only]
    for name in names:
        module = importlib.import_module(f"{commands.__name__}.{name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    chosen = next((a for a in arguments if not a.startswith("-")), None)
    parser = build_parser(only=chosen)
    args = parser.parse_args(arguments)
    if not getattr(args, "func", None):
        parser.print_help()
        return exitcodes.USAGE
    try:
        return int(args.func(args))
    except UserError as error:
        print(f"kvtier {args.command}: error: {error}", file=sys.stderr)
        return exitcodes.USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`kvtier validate --output json | head`): stop quietly, as Unix tools
        # do, and keep Python from complaining again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
