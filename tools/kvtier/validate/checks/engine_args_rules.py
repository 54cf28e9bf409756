"""Rules on vLLM's engine arguments read as vLLM reads them (kvtier.upstream.vllm_args): the extraArgs a user
adds to each model, on both targets, and the argv the chart renders.

The chart renders the flags that carry cross-pod invariants and sized values itself, from the model's own
keys and `cache` (templates/_engine.tpl, reservedEngineFlags: it refuses them in extraArgs on both targets;
on target hyperpod the operator renders --kv-transfer-config too). vLLM keeps the last of a repeated flag
and reads `--max_model_len`, `--max-model-len=1`, `--max-model` and `--kv-transfer-config.kv_role` as the
flags they spell, so any of them in extraArgs would override the chart's value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kvtier.manifests import subject
from kvtier.upstream import vllm_args, vllm_options
from kvtier.validate.checks.crosspod import engines
from kvtier.validate.findings import Severity
from kvtier.validate.inputs import merge
from kvtier.validate.inputs.loader import KeyPath, format_path
from kvtier.validate.rules import Hit, ManifestsContext, ValuesContext, rule
from kvtier.values import extra_args, lookup, model_entries

MODEL = -1  # in a key path: the index of the model whose extraArgs are read


@dataclass(frozen=True)
class Owner:
    """Where the chart takes a reserved flag's value from: a values key (MODEL for the model's index; ()
    where the chart fixes it), what else to say about it, and what to set instead (the key by default)."""

    path: KeyPath
    note: str = ""
    instead: str = ""


# The flags the chart renders on `vllm serve` -> where each comes from.
RESERVED: dict[str, Owner] = {
    "--model": Owner(("models", MODEL, "source"), "the model argument"),
    "--served-model-name": Owner(("models", MODEL, "model")),
    "--tensor-parallel-size": Owner(("models", MODEL, "gpusPerReplica")),
    "--dtype": Owner(("models", MODEL, "dtype")),
    "--max-model-len": Owner(("models", MODEL, "maxModelLen")),
    "--gpu-memory-utilization": Owner(("models", MODEL, "gpuMemoryUtilization")),
    "--revision": Owner(("models", MODEL, "source", "huggingface", "revision")),
    "--enable-prefix-caching": Owner(("cache", "l0", "enabled")),
    "--kv-transfer-config": Owner(
        ("cache", "backend"),
        "with cache.chunkSize, cache.l1, cache.l2 and cache.kvLoadFailurePolicy",
        "those cache settings",
    ),
    "--kv-events-config": Owner(("routing", "strategy"), "kvaware, with engine.kvEventsPort"),
    "--port": Owner(("engine", "port")),
    "--host": Owner((), "0.0.0.0, the address its Service and probes reach"),
}
HYPERPOD_OWNERS: dict[str, Owner] = {
    "--port": Owner(("hyperpod", "worker", "port")),
    "--kv-transfer-config": Owner(
        ("cache", "l1", "enabled"),
        "with cache.l2.enabled: the operator's kvCacheSpec",
        "those cache settings",
    ),
}
NATIVE_RESERVED: dict[str, Owner] = {"--prefix-caching-hash-algo": Owner(("cache", "hashAlgorithm"))}


def reserved(values: dict[str, Any]) -> dict[str, Owner]:
    """The reserved flags of these values -> their owner, as the chart's reservedEngineFlags has them."""
    found = dict(RESERVED)
    if values.get("target", "standalone") == "hyperpod":
        found.update(HYPERPOD_OWNERS)
    cache = values.get("cache") or {}
    offload = lookup(cache, "l1", "enabled", default=True) or lookup(cache, "l2", "enabled", default=True)
    if cache.get("backend") == "vllm-native" and offload:
        found.update(NATIVE_RESERVED)
    return found


def option_strings(flags: Iterable[str]) -> set[str]:
    """Every option string of the flags (their short forms and `--no-` forms included)."""
    wanted = set(flags)
    return {option for option, (flag, _) in vllm_args.KNOWN.items() if flag in wanted}


def _owner_text(owner: Owner, i: int, values: dict[str, Any]) -> tuple[str, str]:
    """(where the chart renders the flag from, as said in a message; the key to set instead, or "")."""
    if not owner.path:
        return f"as {owner.note}", ""
    at = tuple(i if part == MODEL else part for part in owner.path)
    keys = [str(p) for p in (at[2:] if at[:1] == ("models",) else at)]
    now = lookup(values["models"][i] if at[:1] == ("models",) else values, *keys)
    key = format_path(at)
    shown = "" if now is None or isinstance(now, dict | list) else f" (now {now!r})"
    return f"from {key}{shown}{f', {owner.note}' if owner.note else ''}", owner.instead or key


@rule(
    "engine-args-reserved",
    reason="vLLM keeps the last of a repeated flag and reads --max_model_len, --max-model-len=N, a prefix "
    "such as --max-model and dotted keys such as --kv-transfer-config.kv_role as the flag they spell: an "
    "extraArgs item that sets a flag the chart renders overrides a cross-pod invariant or a sized value",
    remedy="drop the item from extraArgs and set the values key the message names (the chart refuses the "
    "item too)",
)
def reserved_args(ctx: ValuesContext) -> Iterator[Hit]:
    owners = reserved(ctx.values)
    who = "the chart or the HyperPod operator" if ctx.values.get("target") == "hyperpod" else "the chart"
    for i, model in model_entries(ctx.values):
        for setting in extra_args(model).settings:
            owned = _owned(setting, owners)
            if not owned:
                continue
            where = f"models[{i}].extraArgs[{setting.index}] {setting.item!r}"
            how = vllm_args.how_read(setting)
            if len(setting.matches) > 1:
                yield Hit(
                    f"{where} is {how}; it may stand for {' or '.join(owned)}, which {who} renders",
                    ("models", i, "extraArgs", setting.index),
                )
                continue
            flag = owned[0]
            source, key = _owner_text(owners[flag], i, ctx.values)
            value = f" to {setting.value}" if setting.value is not None else ""
            yield Hit(
                f"{where} sets {flag}{value}{f' ({how})' if how else ''}, which {who} renders {source}: "
                f"it would override that value{f'; set {key} instead' if key else ''}",
                ("models", i, "extraArgs", setting.index),
            )


def _flag_and_value_in_one(item: str) -> bool:
    """An extraArgs item that holds a flag and its value ('--max-model-len 8192'): vLLM's parser reads it
    as one stray positional."""
    return item.startswith("-") and " " in item.split("=", 1)[0]


def _owned(setting: vllm_args.Setting, owners: dict[str, Owner]) -> list[str]:
    """The chart-owned flags an extraArgs setting may stand for (several for an ambiguous prefix)."""
    return [f for f in dict.fromkeys(vllm_args.KNOWN[m][0] for m in setting.matches) if f in owners]


@rule(
    "engine-args-one-per-item",
    reason="each extraArgs item is one argument: an item holding a flag and its value ('--max-model-len "
    "8192') reaches vLLM as a stray positional argument, and vLLM refuses to start",
    remedy="write the flag and its value as two items (['--max-model-len', '8192']) or as one with '=' "
    "('--max-model-len=8192')",
)
def one_per_item(ctx: ValuesContext) -> Iterator[Hit]:
    for i, model in model_entries(ctx.values):
        for j, item in extra_args(model).positionals:
            if _flag_and_value_in_one(item):
                yield Hit(
                    f"models[{i}].extraArgs[{j}] {item!r} is one argument to vLLM, not a flag and its value",
                    ("models", i, "extraArgs", j),
                )


@rule(
    "engine-args-config-file",
    reason="vLLM splices the settings of a `--config PATH` file in before the command line (kvtier cannot "
    "read the file; the flags the chart renders win over it, the rest take effect unchecked), and reads no "
    "file at all from `--config=PATH`",
    remedy="put the settings in extraArgs (or the model's own keys) instead of a config file; if you keep "
    "one, write '--config' and its path as two items",
)
def config_file(ctx: ValuesContext) -> Iterator[Hit]:
    for i, model in model_entries(ctx.values):
        for setting in extra_args(model).all("--config"):
            where = f"models[{i}].extraArgs[{setting.index}] {setting.item!r}"
            if setting.item == "--config":
                yield Hit(
                    f"{where} reads vLLM settings from a file kvtier cannot check",
                    ("models", i, "extraArgs", setting.index),
                    severity="warning",
                )
            else:  # vLLM splices a file in only for the exact item `--config`
                yield Hit(
                    f"{where}: vLLM accepts it and never reads the file (only the item '--config' followed "
                    "by the path splices a file in)",
                    ("models", i, "extraArgs", setting.index),
                )


def _reported_elsewhere(model: dict[str, Any], owners: dict[str, Owner]) -> set[int]:
    """The extraArgs items the rules above report: reserved flags, one-item flag-and-value, --config."""
    view = extra_args(model)
    return (
        {s.index for s in view.settings if _owned(s, owners)}
        | {s.index for s in view.all("--config")}
        | {j for j, item in view.positionals if _flag_and_value_in_one(item)}
    )


@rule(
    "vllm-arg-invalid",
    reason="vLLM's parser refuses an unknown or ambiguous flag, a missing value, a value that is not the "
    "flag's type or one of its choices, and its config classes a value outside their bounds (vLLM's "
    "argparse parser, vllm/engine/arg_utils.py, vllm/config): the engine exits at start and the pod "
    "crash-loops",
    remedy="fix the extraArgs item as the message says (`vllm serve --help=<flag>` describes a flag); the "
    "facts are the pinned vLLM's (tools/kvtier/upstream/vllm_serve_options.json, `kvtier generate`)",
)
def vllm_arg_invalid(ctx: ValuesContext) -> Iterator[Hit]:
    owners = reserved(ctx.values)
    version = vllm_options.table().vllm
    # The table is one vLLM release's: another release has other flags (new ones, removed ones such as
    # --swap-space), so on an image whose vLLM is not known to be that release a problem is only likely.
    severity, caveat = severity_for_image(ctx.values, version)
    for i, model in model_entries(ctx.values):
        items = model.get("extraArgs")
        if not isinstance(items, list):
            continue
        skip = _reported_elsewhere(model, owners)
        for problem in vllm_options.problems([str(a) for a in items]):
            if problem.index in skip:
                continue
            yield Hit(
                f"models[{i}].extraArgs[{problem.index}] {str(items[problem.index])!r}: vLLM {version} "
                f"refuses it ({problem.stage}){caveat}: {problem.message}",
                ("models", i, "extraArgs", problem.index),
                severity=severity,
            )


def severity_for_image(values: dict[str, Any], version: str) -> tuple[Severity, str]:
    """An error where the engines run vLLM `version` (the release a table of vLLM's facts was read from), a
    warning with the caveat to add to its message where the image may run another release."""
    if runs_the_tables_vllm(values, version):
        return "error", ""
    return "warning", f" (if the image runs vLLM {version}: not the chart's default image)"


def runs_the_tables_vllm(values: dict[str, Any], version: str) -> bool:
    """Whether the engines run the vLLM release of the options table: the chart's default image (built on
    the pinned vLLM), or an image whose tag starts with that release (`v<release>`, `<release>-lmcache<x>`, as
    vLLM's own images and the CPU rig's are tagged)."""
    hyperpod = lookup(values, "target") == "hyperpod"
    image_key = ("hyperpod", "worker", "image") if hyperpod else ("engine", "image")
    image = lookup(values, *image_key)
    default = lookup(merge.umbrella().defaults, *image_key) or {}
    fields = ("registry", "repository", "tag", "digest")
    image = image if isinstance(image, dict) else {}  # absent: the chart's default
    if all(image.get(k, default.get(k)) == default.get(k) for k in fields):
        return True
    return re.match(rf"v?{re.escape(version)}(?:$|-)", str(image.get("tag") or "")) is not None


def rendered_argvs(ctx: ManifestsContext) -> Iterator[tuple[str, list[str]]]:
    """(who, args) of every rendered vLLM engine: standalone containers and HyperPod endpoints' workers."""
    for m, c in engines(ctx):
        yield f"{subject(m)} container {c.get('name')}", [str(a) for a in c.get("args") or []]
    for m in ctx.manifests:
        if m.get("kind") == "InferenceEndpointConfig":
            args = ((m.get("spec") or {}).get("worker") or {}).get("args")
            if isinstance(args, list):
                yield f"{subject(m)} spec.worker", [str(a) for a in args]


@rule(
    "engine-args-rendered",
    scope="manifests",
    reason="vLLM keeps the last of a repeated flag in any spelling: a rendered engine whose argv sets a flag "
    "the chart owns twice runs with the later value, not the chart's",
    remedy="set the flag through its values key only, never through extraArgs or a post-renderer",
)
def rendered_once(ctx: ManifestsContext) -> Iterator[Hit]:
    owned = set(RESERVED) | set(NATIVE_RESERVED)
    for who, argv in rendered_argvs(ctx):
        view = vllm_args.read(argv)
        for flag in sorted(owned):
            found = view.all(flag)
            if len(found) > 1:
                items = ", ".join(f"args[{s.index}] {s.item!r}" for s in found)
                yield Hit(
                    f"{who} sets {flag} {len(found)} times ({items}): vLLM runs with the last, "
                    f"{view.value(flag)!r}",
                    subject=who.split(" ", 1)[0],
                )
