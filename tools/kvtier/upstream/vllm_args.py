"""`vllm serve` arguments as the pinned vLLM (toolchain/versions.env, 0.32) reads them: the one place the
toolkit reads a flag from an argv (values' extraArgs, a rendered container, the engine rig).

What vLLM's parser does (vllm/utils/argparse_utils.py, FlexibleArgumentParser.parse_args, then the argparse
of the engine image's Python), each fact measured against vLLM itself by tests/engine/test_vllm_args_view.py:
- In an item starting with `--`, underscores become dashes in the name, up to its first `.` and never in
  the value after `=`: `--max_model_len=8_192` is `--max-model-len 8_192`. Names are case-sensitive.
- `--flag=value` splits at the first `=`; of a repeated flag the last one wins.
- A unique prefix of an option is that option (argparse's abbreviations: `--max-model` is `--max-model-len`,
  `-t` is `-tp`, but `-t=2` is no option); a prefix of several is refused. No vLLM option is a prefix of
  one of KNOWN's.
- Boolean flags take no value and come in pairs: `--x` sets x true, `--no-x` sets it false.
- A name with a `.` sets one key of a JSON flag (`--kv-transfer-config.kv_role kv_both`, `--x.y=v`; with
  `+` after the key, a list from comma-separated items); the item after a dotted name without `=` is its
  value, whatever it looks like. vLLM gathers the keys of each name as written (`--kv-transfer-conf.a` and
  `--kv-transfer-config.b` apart) into one object and passes them after everything else, in the order the
  names first appear: the last replaces a whole `--flag '{...}'` wherever that is.
- `-O3`, `-O=3` and `-O 3` (0 to 3) are `--optimization-level 3`.
- An item starting with `-` is an option unless it is a negative number or holds a space: one item
  `"--max-model-len 8192"` is a stray positional, which vLLM refuses.
- `--config PATH` (that exact item) splices the YAML file's settings in after the model, before the command
  line, whose flags therefore win over the file's; `--config=PATH` is accepted and the file never read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# The options the toolkit reads or the chart reserves -> (the flag they set, how it takes its value):
# "value" one item, "list" every item up to the next option (nargs="+"), "true"/"false" a boolean.
# read() and resolve() take another such table (vllm_options: every option of vLLM's) in its place.
Options = Mapping[str, tuple[str, str]]
KNOWN: dict[str, tuple[str, str]] = {
    "--model": ("--model", "value"),
    "--served-model-name": ("--served-model-name", "list"),
    "--tensor-parallel-size": ("--tensor-parallel-size", "value"),
    "-tp": ("--tensor-parallel-size", "value"),
    "--pipeline-parallel-size": ("--pipeline-parallel-size", "value"),
    "-pp": ("--pipeline-parallel-size", "value"),
    "--dtype": ("--dtype", "value"),
    "--kv-cache-dtype": ("--kv-cache-dtype", "value"),
    "--max-model-len": ("--max-model-len", "value"),
    "--block-size": ("--block-size", "value"),
    "--gpu-memory-utilization": ("--gpu-memory-utilization", "value"),
    "--port": ("--port", "value"),
    "--host": ("--host", "value"),
    "--revision": ("--revision", "value"),
    "--kv-transfer-config": ("--kv-transfer-config", "value"),
    "--kv-events-config": ("--kv-events-config", "value"),
    "--prefix-caching-hash-algo": ("--prefix-caching-hash-algo", "value"),
    "--enable-prefix-caching": ("--enable-prefix-caching", "true"),
    "--no-enable-prefix-caching": ("--enable-prefix-caching", "false"),
    "--config": ("--config", "value"),
}
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse reads these as values, not options
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")


@dataclass(frozen=True)
class Setting:
    """One flag as vLLM reads it from one item of the argv."""

    flag: str  # the long option it sets ("-tp" -> "--tensor-parallel-size", "--no-x" -> "--x"), or the
    # canonical name as written when it matches no KNOWN option or several (see `matches`)
    value: str | None  # what vLLM gets: the text after `=` or the next item(s), "true"/"false" for a
    # boolean, a dotted key's one-key JSON object; None: no value where one is needed (vLLM refuses)
    index: int  # position of the item that names the flag
    item: str  # that item as written
    matches: tuple[str, ...] = ()  # the KNOWN flags its name may stand for (two or more: ambiguous)
    dotted: tuple[str, ...] = ()  # the JSON keys of a dotted name (`--x.a.b` -> ("a", "b"))
    more: tuple[str, ...] = ()  # a list flag's further items (`--served-model-name a b`: ("b",))

    @property
    def name(self) -> str:
        """The canonical option name as written (dashes, before `=` and any `.`)."""
        return canonical_name(self.item)


@dataclass(frozen=True)
class Argv:
    """An argv as vLLM reads it: settings in written order and the positional items."""

    settings: tuple[Setting, ...]
    positionals: tuple[tuple[int, str], ...]

    def all(self, flag: str) -> list[Setting]:
        return [s for s in self.settings if s.flag == flag]

    def _dotted_group(self, flag: str) -> list[Setting]:
        """The dotted settings vLLM passes last for `flag`: it gathers them by the name as written (with
        dashes) and passes one JSON object per name, in the order the names first appear."""
        groups: dict[str, list[Setting]] = {}
        for s in self.all(flag):
            if s.dotted:
                groups.setdefault(s.name, []).append(s)
        return list(groups.values())[-1] if groups else []

    def last(self, flag: str) -> Setting | None:
        """The setting vLLM keeps for `flag`: the last of its dotted ones if any (those go after the
        rest), else the last one."""
        found = self._dotted_group(flag) or self.all(flag)
        return found[-1] if found else None

    def value(self, flag: str, default: str | None = None) -> str | None:
        """The value vLLM ends up with for `flag` (dotted keys merged into one JSON object), or `default`."""
        dotted = self._dotted_group(flag)
        if dotted:
            merged: dict[str, Any] = {}
            for s in dotted:
                _merge(merged, json.loads(s.value or "{}"))
            return json.dumps(merged)
        found = self.all(flag)
        last = found[-1].value if found else None
        return default if last is None else last


def how_read(setting: Setting) -> str:
    """Why vLLM reads an item as its flag, when the item is not that flag's plain spelling ("" when it is)."""
    name, flag = setting.name, setting.flag
    key = setting.item.split("=", 1)[0].split(".", 1)[0]
    if len(setting.matches) > 1:
        return f"a prefix of {' and '.join(setting.matches)}: vLLM refuses it as ambiguous"
    why = []
    if key != name:
        why.append("vLLM reads underscores in a flag's name as dashes")
    if setting.matches and setting.matches[0] != name:
        why.append(
            f"a prefix of {setting.matches[0]}, which vLLM expands unless another of its flags starts so too"
        )
    elif name != flag and name in KNOWN:
        why.append(f"{name} is {flag}" + (" set false" if KNOWN[name][1] == "false" else ""))
    if setting.dotted:
        why.append(f"a dotted key of {flag}: vLLM replaces the whole JSON value with the dotted keys")
    return "; ".join(why)


def canonical_name(item: str) -> str:
    """The option name of an item as vLLM's parser sees it: before `=` and `.`, underscores as dashes in a
    long name; single-dash names are kept."""
    key = item.split("=", 1)[0].split(".", 1)[0]
    return "--" + key[2:].replace("_", "-") if key.startswith("--") else key


def resolve(name: str, equals: bool = False, known: Options = KNOWN) -> tuple[str, ...]:
    """The KNOWN options a canonical name stands for: itself, else every one it is a prefix of. `equals`:
    the item holds `=`, after which argparse expands no single-dash prefix (`-t=2` is no option)."""
    if name in known:
        return (name,)
    if len(name) < 2 or name == "--" or not name.startswith("-"):
        return ()
    long_name = name.startswith("--")
    if equals and not long_name:
        return ()
    return tuple(o for o in known if o.startswith(name) and o.startswith("--") == long_name)


def is_option(item: str) -> bool:
    """Whether argparse takes an item for an option (else it is a value or a positional)."""
    if len(item) < 2 or not item.startswith("-") or _NEGATIVE_NUMBER.match(item):
        return False
    return " " not in item.split("=", 1)[0]


def read(argv: Iterable[Any], known: Options = KNOWN) -> Argv:
    """The argv (items as strings) as vLLM reads it; `known`: the options whose names and arities it
    resolves (an option outside it takes one value)."""
    items = [str(a) for a in argv]
    settings: list[Setting] = []
    positionals: list[tuple[int, str]] = []
    i = 0
    while i < len(items):
        item = items[i]
        if item == "--":  # argparse: everything after is positional
            positionals += [(j, items[j]) for j in range(i + 1, len(items))]
            break
        if item.startswith("-O") and not item.startswith("--") and item != "-O":
            settings.append(
                Setting("--optimization-level", item[3:] if item[2:3] == "=" else item[2:], i, item)
            )
        elif item == "-O" and items[i + 1 : i + 2] in (["0"], ["1"], ["2"], ["3"]):
            settings.append(Setting("--optimization-level", items[i + 1], i, item))
            i += 2
            continue
        elif _is_dotted(item):
            setting, used = _dotted(items, i, known)
            settings.append(setting)
            i += used
            continue
        elif is_option(item):
            setting, used = _option(items, i, known)
            settings.append(setting)
            i += used
            continue
        else:
            positionals.append((i, item))
        i += 1
    return Argv(tuple(settings), tuple(positionals))


def _is_dotted(item: str) -> bool:
    # vLLM also takes `-0.5` or an item with a space for a dotted name, and then refuses what it makes of it
    return is_option(item) and "." in item.split("=", 1)[0]


def _option(items: list[str], i: int, known: Options = KNOWN) -> tuple[Setting, int]:
    item = items[i]
    name = canonical_name(item)
    matches = resolve(name, "=" in item, known)
    if not matches and not item.startswith("--") and item[:2] in known:
        # argparse reads `-n2` as the two-letter option -n with the value 2 (no KNOWN option is one)
        return Setting(known[item[:2]][0], item[2:], i, item, (item[:2],)), 1
    flags = {known[m][0] for m in matches}
    flag = flags.pop() if len(flags) == 1 else name
    kind = known[matches[0]][1] if len(matches) == 1 else "value"
    if "=" in item:
        return Setting(flag, item.split("=", 1)[1], i, item, matches), 1
    if kind in ("true", "false"):
        return Setting(flag, kind, i, item, matches), 1
    following: list[str] = []
    for later in items[i + 1 :]:
        if is_option(later) or later == "--" or (following and kind != "list"):
            break
        following.append(later)
    value = following[0] if following else None
    return Setting(flag, value, i, item, matches, more=tuple(following[1:])), 1 + len(following)


def _dotted(items: list[str], i: int, known: Options = KNOWN) -> tuple[Setting, int]:
    item = items[i]
    key, has_value, text = item.partition("=")
    used = 1
    if not has_value:
        text = items[i + 1] if i + 1 < len(items) else ""
        used = 2
    name, *keys = key.split(".")
    flag = canonical_name(name)
    matches = resolve(flag, bool(has_value), known)
    if len({known[m][0] for m in matches}) == 1:
        flag = known[matches[0]][0]
    value: Any
    if keys and keys[-1].endswith("+"):
        keys[-1] = keys[-1][:-1]
        value = text.split(",")
    else:
        value = _json_or_text(text)
    for k in reversed(keys):
        value = {k: value}
    missing = not has_value and i + 1 >= len(items)
    return Setting(flag, None if missing else json.dumps(value), i, item, matches, tuple(keys)), used


def _json_or_text(text: str) -> Any:
    """A dotted key's value as vLLM takes it: JSON, else a human-readable integer (8k, 2G), else the text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    found = _HUMAN_INT.fullmatch(text.strip())
    if found:
        number, suffix = found.groups()
        power = "kmgt".index(suffix.lower()) + 1
        if suffix.islower():  # decimal multiples, decimals allowed
            return int(float(number) * 1000**power)
        # binary multiples of whole numbers only; vLLM keeps "1.5K" as text
        return int(number) * 1024**power if number.isdigit() else text
    try:
        return int(text.strip())
    except ValueError:
        return text


def _merge(into: dict[str, Any], update: dict[str, Any]) -> None:
    """Nested keys merge, lists concatenate, anything else is replaced (as vLLM gathers dotted keys)."""
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        elif isinstance(v, list) and isinstance(into.get(k), list):
            into[k] = into[k] + v
        else:
            into[k] = v


__all__ = [
    "KNOWN",
    "Argv",
    "Options",
    "Setting",
    "canonical_name",
    "how_read",
    "is_option",
    "read",
    "resolve",
]
