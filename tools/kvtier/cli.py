"""The `kvtier` command line: one subcommand per user step.

Each module in `kvtier.commands` that defines `register(subparsers)` adds one subcommand; the
handler it sets (`func`) returns an exit code. Adding a step never touches this file.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from kvtier import __version__, commands, exitcodes
from kvtier.errors import UserError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kvtier",
        description="Validate, size, check and exercise the tiered KV-cache inference bundle.",
    )
    parser.add_argument("--version", action="version", version=f"kvtier {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
