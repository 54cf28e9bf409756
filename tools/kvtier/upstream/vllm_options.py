"""`vllm serve` arguments judged without vLLM, as the pinned vLLM's parser and config classes judge them.

The facts are a table dumped from the pinned vLLM (vllm_serve_options.json beside this module, written by
engine_rig/vllm_options_dump.py through `kvtier generate`): every option of the `serve` subparser with its
option strings, arity, choices, type and the numeric bounds of the config-class field it sets. The argv is
read by vllm_args (underscores, `=`, abbreviations, dotted JSON keys, -O), given that table. Refused: an
unknown or ambiguous option, a value missing or given to a flag that takes none, a value that is not an
int or float where the type is one, not one of the choices, or outside the bounds (the last value of a
flag: vLLM keeps that one). A value of a type the table does not understand (vLLM's own converters: JSON
configs, lambdas) is accepted: this judge may miss a refusal, never invent one (tests/engine/
test_vllm_options_table.py holds it to the real parser).
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvtier.upstream import vllm_args

TABLE = Path(__file__).with_name("vllm_serve_options.json")
# The probe's stage (engine_rig/vllm_args_probe.py) that checks each config class's fields.
STAGES = {
    "ModelConfig": "model-fields",
    "CacheConfig": "cache",
    "ParallelConfig": "parallel",
    "SchedulerConfig": "scheduler-fields",
    "LoadConfig": "load",
    "ObservabilityConfig": "observability",
}
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
# vLLM's dotted-key rewriting takes an item like -0.5 for a dotted option name (vllm_args: it then fails)
_NEGATIVE_DECIMAL = re.compile(r"^-\d*\.\d+$")
_UNKNOWN = object()  # a value no understood converter made: accepted as is


@dataclass(frozen=True)
class Problem:
    flag: str  # the option as vLLM names it (its long form), or the item's name when it is none
    index: int  # the argv item
    message: str  # in vLLM's (argparse's, pydantic's) words, then what to do
    stage: str  # "argparse", or the probe's stage of the config class whose bound refuses it


@dataclass(frozen=True)
class Option:
    strings: tuple[str, ...]
    dest: str
    nargs: int | str | None
    action: str
    choices: tuple[str | None, ...] | None
    type: str | None
    accepts: str | None
    none_values: tuple[str, ...]
    bounds: tuple[dict[str, Any], ...]

    @property
    def flag(self) -> str:
        return next((s for s in self.strings if s.startswith("--")), self.strings[0])

    def kind(self, string: str) -> str:
        """How this option string takes its value, in vllm_args' terms."""
        if self.nargs == 0:
            negative = self.action == "store_false" or (
                self.action == "boolean_optional" and string != self.strings[0]
            )
            return "false" if negative else "true"
        return "list" if self.nargs in ("+", "*") else "value"


@dataclass(frozen=True)
class Table:
    vllm: str
    by_string: dict[str, Option]
    known: dict[str, tuple[str, str]]  # vllm_args' options table: string -> (flag, kind)


@functools.cache
def table() -> Table:
    data = json.loads(TABLE.read_text())
    by_string = {}
    for entry in data["options"]:
        option = Option(
            tuple(entry["option_strings"]),
            entry["dest"],
            entry["nargs"],
            entry["action"],
            None if entry["choices"] is None else tuple(entry["choices"]),
            entry.get("type"),
            entry.get("accepts"),
            tuple(entry.get("none_values", ())),
            tuple(entry.get("bounds", ())),
        )
        by_string.update(dict.fromkeys(option.strings, option))
    known = {s: (o.flag, o.kind(s)) for s, o in by_string.items()}
    return Table(data["vllm"], by_string, known)


def _human_int(text: str) -> int:
    """vLLM's human_readable_int: 25.6k is 25,600, 1K is 1,024, a plain integer is itself."""
    value = text.strip()
    found = _HUMAN_INT.fullmatch(value)
    if not found:
        return int(value)
    number, suffix = found.groups()
    power = "kmgt".index(suffix.lower()) + 1
    if suffix.islower():
        return int(float(number) * 1000**power)
    return int(number) * 1024**power  # ValueError on decimals, as vLLM


def convert(option: Option, text: str) -> Any:
    """The value vLLM's converter makes of `text` (None for vLLM's "" and "None"), _UNKNOWN where the table
    does not understand the converter; ValueError when the converter refuses it."""
    if text in option.none_values:
        return None
    if option.type == "int":
        return int(text)
    if option.type == "float":
        return float(text)
    if option.type == "str":
        return text
    if option.type == "json":
        return json.loads(text)
    if option.accepts == "human-readable-int-or-auto" and text.strip().lower() in ("-1", "auto"):
        return -1
    if option.accepts in ("human-readable-int", "human-readable-int-or-auto"):
        return _human_int(text)
    if option.accepts == "lower-snake-case":  # vLLM's backend names: the choices are checked after it
        return text.lower().replace("-", "_")
    if (option.type or "").endswith(".parse_dataclass"):
        return _config_object(text)
    return _UNKNOWN


def _expand_numbers(text: str) -> str:
    """vLLM's _expand_json_human_readable_numbers: a bare 8k or 2G outside JSON strings becomes an integer."""
    parts = re.split(r'("(?:[^"\\]|\\.)*")', text)
    for i in range(0, len(parts), 2):  # outside strings
        parts[i] = re.sub(r"\b\d+(?:\.\d+)?[kKmMgGtT]\b", lambda m: str(_human_int(m.group())), parts[i])
    return "".join(parts)


def _config_object(text: str) -> Any:
    """A config flag's value (vLLM's parse_dataclass: its numbers expanded, then pydantic's
    TypeAdapter(ConfigClass).validate_json): a JSON object, whose keys only vLLM can judge. Text that is no
    JSON ("Invalid JSON") or JSON that is no object ("Input should be an object") is refused."""
    try:
        value = json.loads(_expand_numbers(text))
    except ValueError:
        raise ValueError("not JSON") from None
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


# vLLM's LoRAModulePath (vllm/entrypoints/openai/models/protocol.py): the fields a JSON module may have.
LORA_FIELDS, LORA_REQUIRED = {"name", "path", "base_model_name", "is_3d_lora_weight"}, {"name", "path"}


def _lora_module(text: str) -> None:
    """One --lora-modules item as vLLM's LoRAParserAction reads it: `name=path` (no comma), else a JSON
    object of LoRAModulePath's fields; ValueError otherwise."""
    if text in ("", "None") or ("=" in text and "," not in text):
        return
    try:
        value = json.loads(text)
    except ValueError:
        raise ValueError("neither name=path nor JSON") from None
    if not isinstance(value, dict) or not LORA_REQUIRED <= set(value) <= LORA_FIELDS:
        raise ValueError("not a JSON object of name, path (and base_model_name)")


EXPECTED = {
    "int": "an integer",
    "float": "a number",
    "json": "JSON",
    "config": "a JSON object of the config's fields, e.g. '{\"key\": value}' (or --flag.key value)",
    "human-readable-int": "an integer such as 8192, 8k or 8K",
    "human-readable-int-or-auto": "an integer such as 8192, 8k or 8K, or auto",
    "lower-snake-case": "a name, lower-cased with '-' read as '_' before it is checked",
}


def _value_problems(option: Option, text: str) -> Iterator[str]:
    """What vLLM's parser says of one value, with the fix."""
    if option.action.endswith(".LoRAParserAction"):
        try:
            _lora_module(text)
        except ValueError as error:
            yield (
                f"invalid --lora-modules item {text!r} ({error}); write name=path or "
                '\'{"name": "...", "path": "...", "base_model_name": "..."}\''
            )
        return
    try:
        value = convert(option, text)
    except ValueError:
        kind = option.accepts or option.type or "str"
        kind = "config" if kind.endswith(".parse_dataclass") else kind
        yield (
            f"argument {'/'.join(option.strings)}: invalid {kind} value: {text!r}; "
            f"{option.flag} takes {EXPECTED.get(kind, kind)}"
        )
        return
    if value is _UNKNOWN or option.choices is None:
        return
    shown = None if value is None else str(value)
    if shown not in option.choices:
        listed = ", ".join(repr(c) for c in option.choices if c is not None)
        yield (
            f"argument {'/'.join(option.strings)}: invalid choice: {text!r} (choose from {listed}); "
            f"use one of these"
        )


def _bound_problem(option: Option, value: Any) -> tuple[str, str] | None:
    """(stage, message) of the first config-class bound the value breaks, if any."""
    for bound in option.bounds:
        checks = (
            ("ge", lambda v, b: v >= b, "greater than or equal to"),
            ("gt", lambda v, b: v > b, "greater than"),
            ("le", lambda v, b: v <= b, "less than or equal to"),
            ("lt", lambda v, b: v < b, "less than"),
        )
        for key, holds, words in checks:
            if key in bound and not holds(value, bound[key]):  # `not holds`: NaN breaks every bound
                return STAGES.get(bound["config"], bound["config"]), (
                    f"ValidationError: {bound['config']}.{bound['field']}: Input should be {words} "
                    f"{bound[key]} (input {value!r}); set {option.flag} {words} {bound[key]}"
                )
    return None


def _unknown(name: str, t: Table) -> str:
    close = difflib.get_close_matches(name, [s for s in t.by_string if s.startswith("--")], n=1)
    hint = f"; did you mean {close[0]}?" if close else "; remove it (`vllm serve --help=all` lists them)"
    return f"unrecognized arguments: {name} (vLLM {t.vllm} has no such option){hint}"


def _explicit(setting: vllm_args.Setting) -> bool:
    """Whether the item itself carries the value (`--x=v`, `-n2`), which a flag without values refuses."""
    return "=" in setting.item or (
        not setting.item.startswith("--") and setting.matches == (setting.item[:2],) and len(setting.item) > 2
    )


def _matches(setting: vllm_args.Setting, t: Table) -> tuple[str, ...]:
    """The option strings a setting's name stands for (several: ambiguous)."""
    if setting.dotted:  # it reaches argparse as `--name JSON`, without `=`: prefixes resolve as usual
        return vllm_args.resolve(setting.name, False, t.known)
    if not setting.matches and setting.flag in t.by_string:  # -O3 is --optimization-level 3
        return (setting.flag,)
    return setting.matches


def _setting_problems(setting: vllm_args.Setting, t: Table, cut: bool) -> Iterator[Problem]:
    name, at = setting.name, setting.index
    matches = _matches(setting, t)
    if len(matches) > 1:
        flags = ", ".join(matches)
        message = f"ambiguous option: {name} could match {flags}; write the whole name of the one meant"
        yield Problem(name, at, message, "argparse")
        return
    if not matches:
        yield Problem(name, at, _unknown(name, t), "argparse")
        return
    option = t.by_string[matches[0]]
    flag, spelled = option.flag, "/".join(option.strings)
    if option.action == "help":
        yield Problem(flag, at, "vLLM prints its help and exits instead of serving; remove it", "argparse")
    elif setting.dotted and setting.value is None:  # vLLM's rewriting fails on a dotted name at the end
        yield Problem(
            flag, at, f"{setting.item} is a dotted key of {flag} with no value after it", "argparse"
        )
    elif option.nargs == 0 and setting.dotted:
        yield Problem(flag, at, f"{flag} takes no value, so no dotted JSON keys either", "argparse")
    elif option.nargs == 0 and _explicit(setting):
        message = f"argument {spelled}: ignored explicit argument {setting.value!r}; {flag} takes no value"
        yield Problem(flag, at, message, "argparse")
    elif option.nargs != 0 and setting.value is None and option.nargs != "?" and not cut:
        many = "at least one argument" if option.nargs in ("+", "*") else "one argument"
        yield Problem(flag, at, f"argument {spelled}: expected {many}", "argparse")
    elif option.nargs != 0 and setting.value is not None:
        for text in (setting.value, *setting.more):
            for message in _value_problems(option, text):
                yield Problem(flag, at, message, "argparse")


def _kept(view: vllm_args.Argv, t: Table) -> Iterator[tuple[Option, vllm_args.Setting]]:
    """Per option taking one value, the setting whose value vLLM keeps (the last), unless a dotted one
    replaces it (a JSON object, judged as a value above)."""
    kept: dict[str, tuple[Option, vllm_args.Setting]] = {}
    dotted = set()
    for setting in view.settings:
        matches = _matches(setting, t)
        if len(matches) == 1:
            option = t.by_string[matches[0]]
            kept[option.dest] = (option, setting)
            if setting.dotted:
                dotted.add(option.dest)
    for dest, (option, setting) in kept.items():
        if dest not in dotted and option.nargs in (None, "?") and setting.value is not None:
            yield option, setting


def _stray(view: vllm_args.Argv) -> Iterator[Problem]:
    """Items vLLM takes for no flag's value."""
    for index, item in view.positionals:
        message = f"unrecognized arguments: {item} (a value with no flag taking it); remove it"
        yield Problem(item, index, message, "argparse")


def _negative_decimals(items: list[str], view: vllm_args.Argv) -> list[int]:
    """The items vLLM's dotted-key rewriting reads as an option name with a key (`-0.5`: `-0` with key 5,
    taking the next item as its value), unless a dotted name took them as its value."""
    taken = {s.index + 1 for s in view.settings if s.dotted and "=" not in s.item}
    found: list[int] = []
    for i, item in enumerate(items):
        if i not in taken and (not found or i != found[-1] + 1) and _NEGATIVE_DECIMAL.match(item):
            found.append(i)
    return found


def _dotted_negatives(items: list[str], view: vllm_args.Argv, t: Table, at: list[int]) -> list[Problem]:
    """The argv holds -0.5-like items: vLLM moves each with the item after it to the end as `-0 JSON`.
    Refused, unless a list flag ends the rest of the argv and takes both as its values; the rest of
    vllm_args' reading no longer holds, so nothing else is judged."""
    refused = [
        Problem(
            items[i],
            i,
            f"vLLM reads {items[i]} as a dotted option name, not a value; write the flag and its value as "
            f"one item: --flag={items[i]}",
            "argparse",
        )
        for i in at
    ]
    if at[-1] == len(items) - 1:  # the rewriting fails: no item after it
        return refused[-1:]
    moved = set(at) | {i + 1 for i in at}
    for s in view.settings:
        if s.dotted:
            moved |= {s.index} if "=" in s.item else {s.index, s.index + 1}
    rest = vllm_args.read([item for i, item in enumerate(items) if i not in moved], t.known)
    last = rest.settings[-1] if rest.settings else None
    if last is not None and t.known.get(next(iter(_matches(last, t)), ""), ("", ""))[1] == "list":
        return []
    return refused


def problems(argv: list[str]) -> list[Problem]:
    """What the pinned vLLM refuses in `argv`: the items after `vllm serve MODEL` and the chart's own flags
    (a model's extraArgs), where an item that is neither a flag nor its value is stray (the model is
    already given)."""
    items = [str(a) for a in argv]
    t = table()
    cut = "--" in items  # argparse takes what follows as positionals, and may give one to the flag before
    if cut:
        items = items[: items.index("--")]
    view = vllm_args.read(items, t.known)
    negatives = _negative_decimals(items, view)
    if negatives:
        return _dotted_negatives(items, view, t, negatives)
    found: list[Problem] = []
    for setting in view.settings:
        found += _setting_problems(setting, t, cut)
    found += _stray(view)
    refused = {p.index for p in found}
    for option, setting in _kept(view, t):
        if setting.index in refused or not option.bounds or setting.value is None:
            continue
        value = convert(option, setting.value)
        broken = None if value is None or value is _UNKNOWN else _bound_problem(option, value)
        if broken:
            found.append(Problem(option.flag, setting.index, broken[1], broken[0]))
    return sorted(found, key=lambda p: p.index)


__all__ = ["Option", "Problem", "Table", "convert", "problems", "table"]
