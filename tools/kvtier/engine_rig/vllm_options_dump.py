"""The `vllm serve` options of the pinned vLLM as a table (tools/kvtier/upstream/vllm_serve_options.json),
for kvtier.upstream.vllm_options to judge extraArgs without vLLM. Runs in the engine venv, by path:

    .venv-engine/bin/python tools/kvtier/engine_rig/vllm_options_dump.py OUT.json

The parser is the one vllm_args_probe.py builds (the real `vllm serve` subparser). Per option: its option
strings, dest, nargs, the kind of its argparse action, its choices as strings (null for None), its type
("int", "float", "str", "json", or the qualified name of vLLM's own converter, with what it accepts where
that is known), whether "" and "None" mean None (vLLM's optional_type), and the numeric bounds (ge, gt,
le, lt) of the field of the same name in the config classes EngineArgs builds on every launch. Written
sorted, so a re-dump of the same vLLM is byte-identical.
"""

from __future__ import annotations

import argparse
import inspect
import json
import platform
import sys
from pathlib import Path
from typing import Any

import vllm_args_probe as probe  # beside this script: its directory is on sys.path when run by path

# The config classes EngineArgs.create_engine_config builds from its own same-named fields on every launch
# (and the probe checks): a bound of another class (LoRAConfig, ...) holds only when that feature is on.
CONFIGS = (
    "ModelConfig",
    "CacheConfig",
    "ParallelConfig",
    "SchedulerConfig",
    "LoadConfig",
    "ObservabilityConfig",
)
# Fields EngineArgs rewrites before the config class sees them: their bounds do not bind the flag's value.
REWRITTEN = {
    "data_parallel_size_local": "1 under external load balancing, whatever the flag says",
}
ACTIONS = {
    argparse._StoreAction: "store",
    argparse._StoreTrueAction: "store_true",
    argparse._StoreFalseAction: "store_false",
    argparse._StoreConstAction: "store_const",
    argparse.BooleanOptionalAction: "boolean_optional",
    argparse._AppendAction: "append",
    argparse._AppendConstAction: "append_const",
    argparse._CountAction: "count",
    argparse._HelpAction: "help",
    argparse._VersionAction: "version",
}
# vLLM's wrappers of a converter (vllm/engine/arg_utils.py): qualified name -> whether "" and "None" are None
WRAPPERS = {"optional_type.<locals>._optional_type": True, "parse_type.<locals>._parse_type": False}
HUMAN = {
    "human_readable_int": "human-readable-int",
    "human_readable_int_or_auto": "human-readable-int-or-auto",
}
BOUNDS = ("ge", "gt", "le", "lt")


def _name(fn: Any) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__name__)}"


def converter(fn: Any) -> dict[str, Any]:
    """An action's type as data: its kind, what a vLLM converter accepts (when known), whether it takes
    "" and "None" for None."""
    if fn is None:
        return {"type": "str"}  # argparse keeps the text
    optional = False
    while getattr(fn, "__qualname__", "") in WRAPPERS and fn.__module__ == "vllm.engine.arg_utils":
        optional = optional or WRAPPERS[fn.__qualname__]
        fn = inspect.getclosurevars(fn).nonlocals["return_type"]
    found: dict[str, Any] = {"type": {int: "int", float: "float", str: "str", json.loads: "json"}.get(fn)}
    if found["type"] is None:
        found["type"] = _name(fn)
        if getattr(fn, "__module__", "") == "vllm.utils.argparse_utils" and fn.__name__ in HUMAN:
            found["accepts"] = HUMAN[fn.__name__]
        elif _snake_cases(fn):
            found["accepts"] = "lower-snake-case"
    if optional:
        found["none_values"] = ["", "None"]
    return found


def _snake_cases(fn: Any) -> bool:
    """Whether a converter (vLLM's backend-name lambdas: `s.lower().replace("-", "_")`) lower-cases its
    text and turns '-' into '_' before argparse checks the choices, found by calling it, not by its name."""
    try:
        return all(fn(text) == text.lower().replace("-", "_") for text in ("Ab-Cd_E", "X-Y", "marlin"))
    except Exception:  # a converter that refuses these is some other kind
        return False


def bounds(dest: str) -> list[dict[str, Any]]:
    """The numeric bounds the config classes declare on the field `dest` sets."""
    import annotated_types
    import vllm.config

    field_of = {flag[2:].replace("-", "_"): field for field, flag in probe.FIELD_FLAGS.items()}
    name = field_of.get(dest, dest)
    if name in REWRITTEN:
        return []
    out = []
    for config in CONFIGS:
        field = getattr(vllm.config, config).__pydantic_fields__.get(name)
        found: dict[str, Any] = {}
        for item in field.metadata if field is not None else ():
            if isinstance(item, annotated_types.BaseMetadata):
                found.update({k: getattr(item, k) for k in BOUNDS if getattr(item, k, None) is not None})
        if found:
            out.append({"config": config, "field": name, **found})
    return out


def option(action: argparse.Action) -> dict[str, Any]:
    kind = ACTIONS.get(type(action))
    entry: dict[str, Any] = {
        "option_strings": list(action.option_strings),
        "dest": action.dest,
        "nargs": action.nargs,
        "action": kind or f"other:{_name(type(action))}",
        "choices": None
        if action.choices is None
        else [None if c is None else str(c) for c in action.choices],
    }
    if action.nargs != 0:
        entry.update(converter(action.type))
        entry["bounds"] = bounds(action.dest)
    return entry


def table() -> dict[str, Any]:
    _, serve, _ = probe.serve_parser()
    options = [option(a) for a in serve._actions if a.option_strings]
    return {
        "generated_by": "tools/kvtier/engine_rig/vllm_options_dump.py (kvtier generate)",
        "vllm": probe._vllm_version("vllm"),
        "python": ".".join(platform.python_version_tuple()[:2]),  # its argparse: abbreviation rules differ
        "bound_configs": list(CONFIGS),
        "options": sorted(options, key=lambda o: o["option_strings"]),
    }


def main(out: Path) -> None:
    probe._setup()
    out.write_text(json.dumps(table(), indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
