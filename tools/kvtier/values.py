"""The umbrella's values as every step reads them (validate's rules, plan, the rig): nested keys, the models
list, and a model's extraArgs in the spellings vLLM's parser takes. Read-only and forgiving: a value of the
wrong type reads as absent, since the schema, not these readers, reports it.

Helm's own PathValue (a dependency's `condition`) finds only a non-mapping leaf: that rule is Helm's merge,
in validate/inputs/merge.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kvtier.upstream import vllm_args

INSTANCE_LABEL = "node.kubernetes.io/instance-type"  # how a model selects its instance type (standalone)


def lookup(tree: Any, *keys: str | int, default: Any = None) -> Any:
    """The value under `keys` (mapping keys, list indices), or `default` where the path does not exist; a
    null is a value."""
    for key in keys:
        if isinstance(tree, dict):
            if key not in tree:
                return default
            tree = tree[key]
        elif isinstance(tree, list) and isinstance(key, int) and 0 <= key < len(tree):
            tree = tree[key]
        else:
            return default
    return tree


def keyed(tree: Any, names: set[str], at: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(key path, value) of every key in `names` anywhere in the tree, subcharts' values included; what
    is below a match is not searched further."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key in names:
                yield (*at, key), value
            else:
                yield from keyed(value, names, (*at, key))
    elif isinstance(tree, list):
        for i, item in enumerate(tree):
            yield from keyed(item, names, (*at, i))


def model_entries(values: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(index, entry) of each `models` entry that is a mapping."""
    models = values.get("models")
    if isinstance(models, list):
        yield from ((i, m) for i, m in enumerate(models) if isinstance(m, dict))


def extra_args(model: dict[str, Any], known: vllm_args.Options = vllm_args.KNOWN) -> vllm_args.Argv:
    """A model's extraArgs as vLLM reads them (none when they are not a list: the schema reports that);
    `known`: the options whose names and arities resolve (vllm_args.read)."""
    args = model.get("extraArgs")
    return vllm_args.read(args if isinstance(args, list) else [], known)


def tensor_parallel_arg(model: dict[str, Any]) -> str | None:
    """The tensor parallel size a model's extraArgs give (in any spelling vLLM takes), if any."""
    return extra_args(model).value("--tensor-parallel-size")
