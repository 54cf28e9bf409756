"""Seeded mutations of values files, drawn across the whole chart schema and every value of every
environment, for differential tests against the real judges (not a list of keys somebody picked).

A mutation is one of:
- set a key the schema declares (any depth, present in the file or not) to a value drawn for its schema:
  an enum member or a near miss, numbers at and past its bounds, the strings, numbers and booleans the
  environments use, or a value of another type;
- replace a value the file has with one of the same type from any environment, or of another type;
- delete a key the file has, or set it to null (Helm then keeps the chart's default, or drops the key);
- add vLLM arguments to a model's extraArgs: flags the chart renders, flags the toolkit reads, each in
  vLLM's other spellings (underscores, `=`), with values from the pools;
- and, so that the categories validate judged first on 2026-12-06 are drawn often enough to be measured:
  vLLM's scheduler budget (token budget, sequence counts, chunked prefill on or off, around the model's
  context length and vLLM's per-GPU defaults), a pod's sysctls (safe, unsafe but namespaced, node-wide,
  malformed, repeated; net ones beside hostNetwork), and vLLM's stats switch (`--disable-log-stats` in its
  spellings, with the autoscaler and the alerts that read the engine's metrics on or off).
"""

from __future__ import annotations

import copy
import itertools
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvtier.upstream import vllm_args

Path_ = tuple[str | int, ...]
EDGE_STRINGS = ["", " ", "A", "a b", "-bad", "x" * 64, "0", "true", "null", "1e3", "a=b", "../x", "Üñï"]
EDGE_INTS = [0, -1, 1, 2, 3, 7, 65535, 65536, 2**31]
EDGE_FLOATS = [0.0, -0.5, 0.5, 1.0, 1.5, 0.95]


@dataclass
class Pools:
    """What values are drawn from: every leaf of every environment, by type, and the schema's paths."""

    strings: list[str] = field(default_factory=list)
    ints: list[int] = field(default_factory=list)
    floats: list[float] = field(default_factory=list)
    schema_paths: list[tuple[Path_, dict[str, Any]]] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    by_key: dict[Path_, list[Any]] = field(default_factory=dict)  # every value each key has anywhere

    def any_scalar(self, rng: random.Random) -> Any:
        kind = rng.choice(["str", "int", "float", "bool", "none"])
        return {
            "str": lambda: self.string(rng),
            "int": lambda: self.integer(rng),
            "float": lambda: self.number(rng),
            "bool": lambda: rng.random() < 0.5,
            "none": lambda: None,
        }[kind]()

    def string(self, rng: random.Random) -> str:
        return rng.choice(EDGE_STRINGS) if rng.random() < 0.2 else rng.choice(self.strings)

    def integer(self, rng: random.Random) -> int:
        return rng.choice(EDGE_INTS) if rng.random() < 0.4 or not self.ints else rng.choice(self.ints)

    def number(self, rng: random.Random) -> float:
        return rng.choice(EDGE_FLOATS) if rng.random() < 0.5 or not self.floats else rng.choice(self.floats)


def leaves(node: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """Every (path, value) of a values tree; an empty mapping or list counts as a leaf."""
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from leaves(value, (*path, str(key)))
    elif isinstance(node, list) and node:
        for i, value in enumerate(node):
            yield from leaves(value, (*path, i))
    else:
        yield path, node


def keys(node: Any, path: Path_ = ()) -> Iterator[Path_]:
    """Every mapping key's path (where a delete or a null can land)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*path, str(key))
            yield from keys(value, (*path, str(key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from keys(value, (*path, i))


def schema_paths(schema: dict[str, Any], path: Path_ = ()) -> Iterator[tuple[Path_, dict[str, Any]]]:
    """Every (path, subschema) the schema declares; array items as index 0, a map's free keys as "k"."""
    if not isinstance(schema, dict):
        return
    if path:
        yield path, schema
    for key, sub in (schema.get("properties") or {}).items():
        yield from schema_paths(sub, (*path, key))
    if isinstance(schema.get("items"), dict):
        yield from schema_paths(schema["items"], (*path, 0))
    if isinstance(schema.get("additionalProperties"), dict):
        yield from schema_paths(schema["additionalProperties"], (*path, "kvtier.io/k"))
    for combinator in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(combinator) or []:
            yield from schema_paths(sub, path)


def build_pools(environments: list[dict[str, Any]], schema: dict[str, Any], flags: list[str]) -> Pools:
    pools = Pools(schema_paths=list(schema_paths(schema)), flags=sorted(set(flags)))
    for values in environments:
        for path, value in leaves(values):
            pools.by_key.setdefault(_key_of(path), []).append(value)
            if isinstance(value, bool) or value is None:
                continue
            if isinstance(value, int):
                pools.ints.append(value)
            elif isinstance(value, float):
                pools.floats.append(value)
            elif isinstance(value, str):
                pools.strings.append(value)
    return pools


def _key_of(path: Path_) -> Path_:
    """A path with every list index as 0, as schema_paths names array items."""
    return tuple(0 if isinstance(k, int) else k for k in path)


def rendered_flags(manifests: list[dict[str, Any]]) -> list[str]:
    """The `--flags` of every container the chart renders (engines, router, Curvine), as written."""
    found = []
    for m in manifests:
        pod = ((m.get("spec") or {}).get("template") or {}).get("spec") or {}
        for c in pod.get("containers") or []:
            found += [
                a.split("=", 1)[0] for a in c.get("args") or [] if isinstance(a, str) and a.startswith("--")
            ]
    return found


VLLM_OPTIONS = Path(vllm_args.__file__).with_name("vllm_serve_options.json")


def vllm_options() -> dict[str, dict[str, Any]]:
    """Every `vllm serve` option string -> its table entry (choices, type), as dumped from the pinned vLLM."""
    table = json.loads(VLLM_OPTIONS.read_text())
    return {flag: option for option in table["options"] for flag in option["option_strings"]}


def flag_pool(rendered: list[str]) -> list[str]:
    """Flags to add to extraArgs: vLLM's own options, those the chart renders and those the toolkit reads
    (vllm_args.KNOWN), and a few vLLM does not have."""
    unknown = ["--no-such-flag", "--endpoint", "--gpu-memory", "--v"]
    known = {f for f in vllm_args.KNOWN if f.startswith("-")}
    return sorted(set(rendered) | known | set(vllm_options()) | set(unknown))


def _for_schema(rng: random.Random, sub: dict[str, Any], pools: Pools) -> Any:
    """A value for a key with this schema: more often one it accepts (an enum member, a number inside its
    bounds, a string its pattern takes) than one it does not (a near miss, a bound crossed, another type)."""
    if rng.random() < 0.08:
        return pools.any_scalar(rng)
    if "enum" in sub:
        choice = rng.choice(sub["enum"])
        if rng.random() < 0.2 and isinstance(choice, str):
            return rng.choice([choice.upper(), choice + "x", choice.replace("-", "_"), ""])
        return choice
    kinds = sub.get("type")
    kind = rng.choice(kinds) if isinstance(kinds, list) else kinds
    if kind in ("integer", "number"):
        low = sub.get("minimum", sub.get("exclusiveMinimum"))
        high = sub.get("maximum", sub.get("exclusiveMaximum"))
        edges = [b + d for b in (low, high) if isinstance(b, int | float) for d in (-1, 0, 1)]
        if edges and rng.random() < 0.4:
            return rng.choice(edges)
        value = (
            pools.integer(rng) if kind == "integer" else rng.choice([pools.number(rng), pools.integer(rng)])
        )
        if rng.random() < 0.6:  # inside the bounds
            value = min(
                max(value, low if isinstance(low, int | float) else value),
                high if isinstance(high, int | float) else value,
            )
        return value
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "string":
        pattern = sub.get("pattern")
        if pattern and rng.random() < 0.7:
            matching = [v for v in pools.strings if re.search(pattern, v)]
            if matching:
                return rng.choice(matching)
        return pools.string(rng)
    if kind == "array":
        return rng.choice([[], [], [pools.any_scalar(rng)], None])
    if kind == "object":
        return rng.choice([{}, {}, {}, {}, None, {pools.string(rng) or "k": pools.any_scalar(rng)}])
    return pools.any_scalar(rng)


def _container(values: dict[str, Any], path: Path_, create: bool) -> tuple[Any, str | int] | None:
    """The parent of `path` and its last key. With `create`, missing mappings and lists are made on the
    way (a list of one item where the next key is an index); an index past a list's end lands on a random
    existing item."""
    node: Any = values
    for key, after in itertools.pairwise(path):
        if isinstance(key, int):
            if not isinstance(node, list):
                return None
            if not node:
                if not create:
                    return None
                node.append([] if isinstance(after, int) else {})
            node = node[key % len(node)]
            continue
        if not isinstance(node, dict):
            return None
        if not isinstance(node.get(key), dict | list):
            if not create:
                return None
            node[key] = [] if isinstance(after, int) else {}
        node = node[key]
    last = path[-1]
    if isinstance(last, int):
        if not isinstance(node, list):
            return None
        if not node:
            if not create:
                return None
            node.append(None)
        return node, last % len(node)
    return (node, last) if isinstance(node, dict) else None


def _set_schema_key(rng: random.Random, values: dict[str, Any], pools: Pools) -> str:
    # Mostly a key whose parent the file has: a new deep path needs the required keys of every mapping
    # made on the way, and would mostly test the schema's `required` alone.
    for _ in range(4):
        path, sub = rng.choice(pools.schema_paths)
        if _container(copy.deepcopy(values), path, create=False) is not None:
            break
    found = _container(values, path, create=True)
    if found is None:
        return f"(no place for {path})"
    parent, key = found
    elsewhere = pools.by_key.get(_key_of(path))
    # Half the time a value this key has in some environment: the realistic edit (copying a setting
    # from another environment), most of which the schema takes, so the judges downstream get a say.
    if elsewhere and rng.random() < 0.5:
        parent[key] = copy.deepcopy(rng.choice(elsewhere))
    else:
        parent[key] = _for_schema(rng, sub, pools)
    return f"schema {'.'.join(map(str, path))} = {parent[key]!r}"


def _replace_value(rng: random.Random, values: dict[str, Any], pools: Pools) -> str:
    path, old = rng.choice(list(leaves(values)))
    found = _container(values, path, create=False) if path else None
    if found is None:
        return "(nothing to replace)"
    parent, key = found
    elsewhere = pools.by_key.get(_key_of(path))
    if elsewhere and rng.random() < 0.4:
        new: Any = copy.deepcopy(rng.choice(elsewhere))
    elif rng.random() < 0.7 and not isinstance(old, bool) and isinstance(old, int | float | str):
        new = {int: pools.integer, float: pools.number, str: pools.string}[type(old)](rng)
    else:
        new = pools.any_scalar(rng)
    parent[key] = new
    return f"replace {'.'.join(map(str, path))}: {old!r} -> {new!r}"


def _delete_key(rng: random.Random, values: dict[str, Any], pools: Pools) -> str:
    every = list(keys(values))
    if not every:
        return "(no key)"
    path = rng.choice(every)
    found = _container(values, path, create=False)
    if found is None:
        return "(no key)"
    parent, key = found
    if rng.random() < 0.5:
        parent[key] = None
        return f"null {'.'.join(map(str, path))}"
    del parent[key]
    return f"delete {'.'.join(map(str, path))}"


def _spell(rng: random.Random, flag: str) -> str:
    """The flag in one of the spellings vLLM reads alike (vllm_args' docstring)."""
    if flag.startswith("--") and rng.random() < 0.3:
        return "--" + flag[2:].replace("-", "_")
    return flag


def _extra_args(rng: random.Random, values: dict[str, Any], pools: Pools) -> str:
    models = values.get("models")
    if not isinstance(models, list) or not models or not isinstance(models[0], dict):
        return "(no model)"
    model = rng.choice([m for m in models if isinstance(m, dict)])
    extra = model.get("extraArgs")
    args = list(extra) if isinstance(extra, list) else []
    added = []
    options = vllm_options()
    for _ in range(rng.randint(1, 2)):
        flag = rng.choice(pools.flags)
        choices = (options.get(flag) or {}).get("choices")
        if choices and rng.random() < 0.6:
            value = str(rng.choice(choices))
        else:
            value = str(rng.choice([pools.string(rng), pools.integer(rng), pools.number(rng)]))
        flag = _spell(rng, flag)
        shape = rng.random()
        if shape < 0.5:
            added += [flag, value]
        elif shape < 0.8:
            added.append(f"{flag}={value}")
        else:
            added.append(flag)
    model["extraArgs"] = [*args, *added]
    return f"extraArgs += {added}"


# Token counts around vLLM's GPU batch defaults (2048, 8192, 16384) and the environments' context lengths.
BUDGET_SIZES = [1, 16, 255, 256, 1024, 2047, 2048, 2049, 4096, 8192, 8193, 16384, 32768]
SCHEDULER_FLAGS = (
    "--max-num-batched-tokens",
    "--max-num-seqs",
    "--max-num-active-seqs",
    "--long-prefill-token-threshold",
)


def _model(rng: random.Random, values: dict[str, Any]) -> dict[str, Any] | None:
    models = values.get("models")
    entries = [m for m in models if isinstance(m, dict)] if isinstance(models, list) else []
    return rng.choice(entries) if entries else None


def _scheduler_budget(rng: random.Random, values: dict[str, Any], pools: Pools) -> str:
    model = _model(rng, values)
    if model is None:
        return "(no model)"
    length = model.get("maxModelLen")
    sizes = list(BUDGET_SIZES)
    if isinstance(length, int) and not isinstance(length, bool):
        sizes += [length - 1, length, length + 1]
    added: list[str] = []
    for flag in rng.sample(SCHEDULER_FLAGS, rng.randint(1, 3)):
        value = str(rng.choice(sizes))
        added += [_spell(rng, flag), value] if rng.random() < 0.6 else [f"{_spell(rng, flag)}={value}"]
    if rng.random() < 0.6:
        added.append(rng.choice(["--enable-chunked-prefill", "--no-enable-chunked-prefill"]))
    if rng.random() < 0.15:
        added += ["--performance-mode", "throughput"]
    if rng.random() < 0.25:
        model["maxModelLen"] = rng.choice([512, 4096, 8192, 16384, 32768])
    extra = model.get("extraArgs")
    model["extraArgs"] = [*(extra if isinstance(extra, list) else []), *added]
    return f"scheduler: extraArgs += {added}, maxModelLen {model.get('maxModelLen')!r}"


# Sysctl names by how Kubernetes treats them (docs "Using sysctls in a Kubernetes Cluster"): the kubelet's
# safe set, namespaced ones it allows only when a node says so, node-wide ones it never allows, and names
# the API server refuses outright (its validation: dotted or slashed lowercase segments, at most 253).
SYSCTLS = {
    "safe": ["kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies"],
    "namespaced": ["net.core.somaxconn", "kernel.shmmax", "kernel.msgmax", "fs.mqueue.msg_max", "kernel.sem"],
    "node-wide": ["vm.max_map_count", "kernel.pid_max", "fs.file-max", "vm.swappiness"],
    "malformed": ["Net.core.somaxconn", "net..core", "-net.core.x", "net.core.", "net core", "a" * 254],
    "slashed": ["net/ipv4/conf/eth0.1/forwarding", "kernel/shm_rmid_forced"],
}
SYSCTL_VALUES = ["1", "65535", "1024 65535", "", "0"]


def _sysctls(rng: random.Random, values: dict[str, Any], pools: Pools) -> str:
    places = [p for p, _ in pools.schema_paths if p[-1] == "sysctls"]
    path = rng.choice(places)
    found = _container(values, path, create=True)
    if found is None:
        return f"(no place for {path})"
    parent, key = found
    kind = rng.choice([*SYSCTLS, "repeated"])
    names = SYSCTLS[rng.choice(list(SYSCTLS))] if kind == "repeated" else SYSCTLS[kind]
    name = rng.choice(names)
    items = [{"name": name, "value": rng.choice(SYSCTL_VALUES)}]
    if kind == "repeated":
        items.append({"name": name, "value": rng.choice(SYSCTL_VALUES)})
    current = parent.get(key)
    parent[key] = [*(current if isinstance(current, list) else []), *items]
    done = f"sysctl ({kind}): {'.'.join(map(str, path))} += {[i['name'] for i in items]}"
    # A pod in the host's network namespace may set no net.* sysctl: draw the pods that can be there too.
    host_path = (*path[:-2], "hostNetwork")
    declared = any(p == host_path for p, _ in pools.schema_paths)
    host = _container(values, host_path, create=False) if declared else None
    if host is not None and rng.random() < 0.5:
        host[0][host[1]] = True
        done += ", hostNetwork true"
    return done


STATS_OFF = ["--disable-log-stats", "--disable_log_stats", "--disable-log-stat", "--disable-log-stats=true"]
METRIC_READERS = (("engine", "autoscaling", "enabled"), ("metrics", "prometheusRule", "enabled"))


def _stats_switch(rng: random.Random, values: dict[str, Any], pools: Pools) -> str:
    model = _model(rng, values)
    if model is None:
        return "(no model)"
    flag = rng.choice(STATS_OFF)
    extra = model.get("extraArgs")
    model["extraArgs"] = [*(extra if isinstance(extra, list) else []), flag]
    done = f"metrics: extraArgs += [{flag!r}]"
    for path in METRIC_READERS:  # the readers of the engine's metrics, switched as a user might
        if rng.random() < 0.3:
            found = _container(values, path, create=True)
            if found is not None:
                found[0][found[1]] = rng.random() < 0.5
                done += f", {'.'.join(path)} {found[0][found[1]]}"
    return done


MUTATIONS = (
    _set_schema_key,
    _set_schema_key,
    _replace_value,
    _replace_value,
    _delete_key,
    _extra_args,
    _scheduler_budget,
    _sysctls,
    _stats_switch,
)


def mutate(rng: random.Random, base: dict[str, Any], pools: Pools) -> tuple[dict[str, Any], list[str]]:
    """A copy of `base` with one to three mutations (mostly one: each more makes a refusal likelier, and
    a file refused for one reason says nothing of the others), and what each did."""
    values = copy.deepcopy(base)
    count = rng.choices([1, 2, 3], weights=[6, 3, 1])[0]
    done = [rng.choice(MUTATIONS)(rng, values, pools) for _ in range(count)]
    return values, done


def load_schema(chart: Path) -> dict[str, Any]:
    return json.loads((chart / "values.schema.json").read_text())
