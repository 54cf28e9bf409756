"""vLLM's `vllm serve` parser alone, what kvtier.upstream.vllm_args is measured against: its option strings
and, for each case, the namespace it parses. Runs in the engine venv (vLLM's CPU build), by path:

    .venv-engine/bin/python tests/harness/engine/vllm_parser_probe.py REQUEST.json

REQUEST: {"dests": [namespace attributes to report], "argvs": [argv lists after `vllm`, so starting with
"serve"]}. Prints one JSON object: {"options": {option string: {"dest", "nargs", "boolean"}} of the serve
parser, "cases": [{"ok", "error" (argparse's words, "" when ok), "values": {dest: value, a config class as
its fields}}]}. The parser is the one vllm_args_probe.py builds, as `vllm serve` does; nothing past parsing
is checked here (that is vllm_args_probe's job).
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import os
import sys
from pathlib import Path
from typing import Any

from product_probes import load  # this folder is first on sys.path: the probe runs by path

_args_probe = load("vllm_args_probe")
Refused, _setup, parse = _args_probe.Refused, _args_probe._setup, _args_probe.parse


def _options() -> dict[str, dict[str, Any]]:
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(description="vLLM CLI")
    serve = ServeSubcommand().subparser_init(parser.add_subparsers(dest="subparser"))
    return {
        option: {
            "dest": action.dest,
            "nargs": action.nargs,
            "boolean": isinstance(action, argparse.BooleanOptionalAction),
        }
        for option, action in serve._option_string_actions.items()
    }


def _plain(value: Any) -> Any:
    """A parsed value as JSON can carry it: a config class as its fields, an enum as its value."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value if value is None or isinstance(value, str | int | float | bool) else str(value)


def _case(argv: list[str], dests: list[str]) -> dict[str, Any]:
    try:
        args, _ = parse(argv)
    except Refused as refusal:
        return {"ok": False, "error": str(refusal), "values": {}}
    except Exception as error:  # FlexibleArgumentParser's own rewriting refusing (a missing value, a file)
        return {"ok": False, "error": f"{type(error).__name__}: {error}", "values": {}}
    return {"ok": True, "error": "", "values": {d: _plain(getattr(args, d, None)) for d in dests}}


def main(path: Path) -> None:
    _setup()
    request = json.loads(path.read_text())
    # vLLM logs to stdout; the answer keeps this process's stdout to itself and the rest goes to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    cases = [_case(argv, request["dests"]) for argv in request["argvs"]]
    out.write(json.dumps({"options": _options(), "cases": cases}) + "\n")
    out.flush()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
