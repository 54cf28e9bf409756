"""Rules that refuse a credential written into the values: an API key in the engines' or the router's extra
arguments, a credential-named environment variable with a literal `value`.

A literal in values lands in Git, in Helm's release history (a Secret of the release holds every revision's
values) and in the rendered pod spec, readable by anyone who may read Deployments. The chart takes the API
key from a Secret (`auth.apiKeySecret`: the engines get VLLM_API_KEY from it, the router `--api-key` through
`$(VLLM_API_KEY)`), and any variable can come from one with `valueFrom.secretKeyRef`.

A Kubernetes dependent variable reference, `$(NAME)`, is not a literal: the kubelet expands it from the
container's env when it starts the container, so `--api-key=$(VLLM_API_KEY)` keeps the key in the Secret.
No message repeats the value: a report of a leak must not leak it again.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from kvtier.upstream import vllm_args
from kvtier.validate.inputs.loader import KeyPath, format_path
from kvtier.validate.rules import Hit, ValuesContext, rule
from kvtier.values import lookup, model_entries

API_KEY = "--api-key"
# vLLM's serve parser expands a unique prefix of an option (argparse's abbreviations); `--api-k` is the
# shortest one that names --api-key only (`--api` is --api-key or --api-server-count).
SHORTEST_PREFIX = "--api-k"
# Environment variable names that hold a credential (upper-cased before matching): VLLM_API_KEY,
# HF_TOKEN, HUGGING_FACE_HUB_TOKEN, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, *_PASSWORD, *_SECRET ...
CREDENTIAL_NAME = re.compile(
    r"(API_?KEY|TOKEN|SECRET|SECRET_?KEY|ACCESS_?KEY|PRIVATE_?KEY|PASSW(OR)?D|PASSPHRASE)$"
)
# Switches about a credential, not credentials (HF_HUB_DISABLE_IMPLICIT_TOKEN=1).
SWITCH_NAME = re.compile(r"(^|_)(DISABLE|ENABLE|ALLOW|USE)_")
# A value made only of $(NAME) references (Kubernetes' dependent variables; `$$(` is an escaped literal).
REFERENCES_ONLY = re.compile(r"(?:\$\([A-Za-z_][A-Za-z0-9_.-]*\))+")


def is_literal(value: Any) -> bool:
    """Whether a value holds text of its own (not empty, not only `$(NAME)` references)."""
    if value is None:
        return False
    text = str(value).strip()
    return bool(text) and not REFERENCES_ONLY.fullmatch(text)


def is_api_key(name: str) -> bool:
    """Whether a canonical option name (vllm_args.canonical_name) is --api-key or a prefix vLLM expands
    to it."""
    return name.startswith(SHORTEST_PREFIX) and API_KEY.startswith(name)


def argument_lists(values: dict[str, Any]) -> Iterator[tuple[KeyPath, Any]]:
    """(key path, items as written: a list unless the schema refuses it) of every extra argument list: each
    model's, the engines' and the router's."""
    for i, model in model_entries(values):
        yield ("models", i, "extraArgs"), model.get("extraArgs")
    yield ("engine", "extraArgs"), lookup(values, "engine", "extraArgs")
    yield ("router", "extraArgs"), lookup(values, "router", "extraArgs")


def api_key_values(items: list[Any]) -> Iterator[tuple[vllm_args.Setting, list[str]]]:
    """Each --api-key setting (any spelling) and the values it takes: vLLM's api_key is a list, so every
    item up to the next option counts (one only after `=`)."""
    argv = vllm_args.read(items)
    starts = [s.index for s in argv.settings]
    for setting in argv.settings:
        if not is_api_key(setting.name):
            continue
        taken = [] if setting.value is None else [setting.value]
        if "=" not in setting.item.split(".", 1)[0]:
            after = [t for t in starts if t > setting.index]
            end = min(after) if after else len(items)
            taken += [text for j, text in argv.positionals if setting.index + 1 < j < end]
        yield setting, taken


def _how_read(setting: vllm_args.Setting) -> str:
    """Why vLLM reads an item as --api-key when it is not that plain spelling ("" when it is)."""
    why = []
    if setting.item.split("=", 1)[0].split(".", 1)[0] != setting.name:
        why.append("vLLM reads underscores in a flag's name as dashes")
    if setting.name != API_KEY:
        why.append(f"{setting.name} is a prefix of --api-key, which vLLM expands")
    return "; ".join(why)


def _shown(item: str) -> str:
    """An item as the message shows it: the flag as written, never its value."""
    name, equals, _ = item.partition("=")
    return f"{name}=..." if equals else name


@rule(
    "api-key-not-inline",
    reason="an API key written into extraArgs lands in Git, Helm's release history and the rendered pod "
    "spec, readable by anyone who may read Deployments; vLLM reads --api_key, --api-key=KEY and a prefix "
    "such as --api-k as --api-key",
    remedy="put the key in a Secret and set auth.apiKeySecret.name (and .key, default api-key): the chart "
    "gives the engines VLLM_API_KEY and the router --api-key from it; or pass a variable that comes from a "
    "Secret (valueFrom.secretKeyRef) as --api-key=$(VAR)",
)
def api_key_not_inline(ctx: ValuesContext) -> Iterator[Hit]:
    for at, items in argument_lists(ctx.values):
        if not isinstance(items, list):
            continue
        for setting, taken in api_key_values(items):
            if any(is_literal(v) for v in taken):
                how = _how_read(setting)
                yield Hit(
                    f"{format_path((*at, setting.index))} {_shown(setting.item)!r} sets --api-key to a "
                    f"literal key{f' ({how})' if how else ''}: the key would be stored in the values, the "
                    "release history and the pod spec",
                    (*at, setting.index),
                )


def env_lists(tree: Any, at: KeyPath = ()) -> Iterator[tuple[KeyPath, dict[str, Any]]]:
    """(key path, entry) of every `name`/`value` entry of a list anywhere in the values: engine.extraEnv,
    router.extraEnv, the Curvine subchart's extraEnv, any other container env list."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from env_lists(value, (*at, key))
    elif isinstance(tree, list):
        for j, item in enumerate(tree):
            if isinstance(item, dict) and isinstance(item.get("name"), str) and "value" in item:
                yield (*at, j), item
            else:
                yield from env_lists(item, (*at, j))


@rule(
    "secret-env-not-inline",
    reason="an environment variable named as a credential (VLLM_API_KEY, HF_TOKEN, *_API_KEY, *_TOKEN, "
    "*_SECRET, *PASSWORD, AWS_SECRET_ACCESS_KEY ...) with a literal value keeps the secret in Git, Helm's "
    "release history and the rendered pod spec",
    remedy="set it with valueFrom.secretKeyRef (a Secret's key) instead of value; for the API key, put it in "
    "a Secret and set auth.apiKeySecret.name (and .key), from which the chart sets VLLM_API_KEY",
)
def secret_env_not_inline(ctx: ValuesContext) -> Iterator[Hit]:
    for at, entry in env_lists(ctx.values):
        name = entry["name"]
        upper = name.upper()
        if CREDENTIAL_NAME.search(upper) and not SWITCH_NAME.search(upper) and is_literal(entry.get("value")):
            yield Hit(f"{format_path(at)} sets {name} to a literal value, not a Secret's key", (*at, "value"))
