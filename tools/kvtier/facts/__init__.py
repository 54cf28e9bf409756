"""Shipped facts as data, each entry with the published file it was read from and whether it was confirmed.

- `models/<name>.yaml`: one model's config.json fields (Hugging Face key names), its Hub repo ids, one source
  per id (the published file's URL, where its content was read, the date), `confirmed` (every field seen with
  that value in the real file) and `unconfirmed` (fields no real copy showed); `gated` and `num_parameters`
  where known, each with its own source.
- `instances.yaml`: GPU models (compute capability, usable memory, dense FP16/BF16 tensor TFLOPS) and GPU
  instance types (GPU, count, host memory, NVMe instance store), with their sources and the figures left
  unconfirmed.
- `hyperpod_operator.yaml`: what the HyperPod operator renders, read by kvtier.upstream.hyperpod_operator.
- `curvine_read.yaml`: Curvine's read speed as this project measured it, one entry per client read setting,
  each with its date, command and machine (`curvine_reads`; kvtier.plan.readspeed picks the one that applies).

A rule may refuse only on a confirmed fact: kvtier.validate.rules.Hit.unconfirmed turns an error that rests
on an unconfirmed one into a warning that names it. tests/unit/test_facts_data.py loads every file.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent
MODELS = HERE / "models"
INSTANCES = HERE / "instances.yaml"


class FactsError(ValueError):
    """A shipped facts file that does not hold what this module reads: a defect of the package."""


@dataclass(frozen=True)
class Source:
    url: str  # the published file
    read_from: str  # where its content was read (the file itself or a copy of it)
    checked: str  # the date it was read (YYYY-MM-DD)
    id: str = ""  # models: the Hub repo id this source is the config.json of


@dataclass(frozen=True)
class Model:
    name: str
    ids: tuple[str, ...]
    config: dict[str, Any]  # config.json's fields; `gated` and `num_parameters` added where shipped
    sources: tuple[Source, ...]
    unconfirmed: frozenset[str]  # config keys no real copy of the file showed ("*": none was seen)
    gated: bool | None = None
    note: str = ""

    def unconfirmed_of(self, keys: Iterable[str]) -> list[str]:
        """Those of `keys` (present in config) this entry could not confirm."""
        return [k for k in keys if k in self.config and ("*" in self.unconfirmed or k in self.unconfirmed)]


@dataclass(frozen=True)
class Gpu:
    name: str
    compute_capability: tuple[int, int]
    memory_gib: float  # usable per GPU, as the driver reports it
    confirmed: bool
    sources: tuple[Source, ...]
    note: str = ""
    dense_fp16_tflops: float | None = None  # peak dense FP16/BF16 tensor TFLOPS; None: no figure found
    dense_fp16_tflops_confirmed: bool = False  # read in a stored copy of NVIDIA's datasheet
    dense_fp16_tflops_source: Source | None = None


@dataclass(frozen=True)
class InstanceType:
    name: str  # with SageMaker's `ml.` prefix
    gpu: str
    gpus: int
    host_gib: float
    instance_store_gb: int | None  # None: not known; 0: EBS only
    unconfirmed: frozenset[str]  # of gpu, gpus, host_gib, instance_store_gb ("*": none confirmed)
    source: Source | None
    note: str = ""

    def unconfirmed_of(self, fields: Iterable[str]) -> list[str]:
        return [f for f in fields if "*" in self.unconfirmed or f in self.unconfirmed]


def _mapping(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise FactsError(f"{where}: expected a mapping, found {type(data).__name__}")
    return data


def _source(data: Any, where: str) -> Source:
    fields = _mapping(data, where)
    missing = [k for k in ("url", "read_from", "checked") if not fields.get(k)]
    if missing:
        raise FactsError(f"{where}: a source needs {', '.join(missing)}")
    return Source(
        str(fields["url"]), str(fields["read_from"]), str(fields["checked"]), str(fields.get("id", ""))
    )


def _read(path: Path) -> dict[str, Any]:
    try:
        return _mapping(yaml.safe_load(path.read_text(encoding="utf-8")), str(path))
    except yaml.YAMLError as error:
        raise FactsError(f"{path}: not YAML: {error}") from None


def _model(path: Path) -> Model:
    data = _read(path)
    where = str(path)
    ids = data.get("ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise FactsError(f"{where}: ids must be a non-empty list of Hub repo ids")
    config = dict(_mapping(data.get("config"), f"{where}: config"))
    sources = tuple(_source(s, f"{where}: sources[{n}]") for n, s in enumerate(data.get("sources") or []))
    if {s.id for s in sources} - set(ids):
        raise FactsError(f"{where}: a source names an id that is not in ids")
    unconfirmed = set(map(str, data.get("unconfirmed") or []))
    if data.get("confirmed") is not True:
        unconfirmed = unconfirmed or {"*"}
    elif unconfirmed:
        raise FactsError(f"{where}: confirmed is true, yet unconfirmed lists {sorted(unconfirmed)}")
    if not sources:
        unconfirmed = {"*"}
    gated = None
    for extra in ("gated", "num_parameters"):
        if extra in data:
            entry = _mapping(data[extra], f"{where}: {extra}")
            if not entry.get("source"):
                raise FactsError(f"{where}: {extra} needs a source")
            config[extra] = entry["value"]
    if isinstance(config.get("gated"), bool):
        gated = config["gated"]
    return Model(
        path.stem, tuple(ids), config, sources, frozenset(unconfirmed), gated, str(data.get("note") or "")
    )


@cache
def models() -> dict[str, Model]:
    """Every shipped model by name, in file-name order."""
    return {path.stem: _model(path) for path in sorted(MODELS.glob("*.yaml"))}


@cache
def _instances_file() -> tuple[dict[str, Gpu], dict[str, InstanceType]]:
    data = _read(INSTANCES)
    where = str(INSTANCES)
    named = {
        str(key): _source(value, f"{where}: sources.{key}")
        for key, value in _mapping(data.get("sources"), f"{where}: sources").items()
    }

    def source(key: Any, at: str) -> Source | None:
        if key in (None, ""):
            return None
        if key not in named:
            raise FactsError(f"{where}: {at} names source {key!r}, which sources does not define")
        return named[key]

    gpus: dict[str, Gpu] = {}
    for name, raw in _mapping(data.get("gpus"), f"{where}: gpus").items():
        entry = _mapping(raw, f"{where}: gpus.{name}")
        capability = entry.get("compute_capability")
        if not (isinstance(capability, list) and len(capability) == 2):
            raise FactsError(f"{where}: gpus.{name}.compute_capability must be [major, minor]")
        cited = (
            source(entry.get("compute_capability_source"), f"gpus.{name}"),
            source(entry.get("memory_source"), f"gpus.{name}"),
        )
        tflops = entry.get("dense_fp16_tflops")
        if tflops is not None and (
            isinstance(tflops, bool) or not isinstance(tflops, int | float) or tflops <= 0
        ):
            raise FactsError(f"{where}: gpus.{name}.dense_fp16_tflops must be a positive number or null")
        tflops_source = source(entry.get("dense_fp16_tflops_source"), f"gpus.{name}")
        tflops_confirmed = entry.get("dense_fp16_tflops_confirmed") is True
        if tflops_confirmed and (tflops is None or tflops_source is None):
            raise FactsError(
                f"{where}: gpus.{name}: a confirmed dense_fp16_tflops needs the figure and its source"
            )
        gpus[str(name)] = Gpu(
            str(name),
            (int(capability[0]), int(capability[1])),
            float(entry["memory_gib"]),
            entry.get("confirmed") is True,
            tuple(s for s in cited if s),
            str(entry.get("note") or ""),
            None if tflops is None else float(tflops),
            tflops_confirmed,
            tflops_source,
        )
    types: dict[str, InstanceType] = {}
    for name, raw in _mapping(data.get("instance_types"), f"{where}: instance_types").items():
        entry = _mapping(raw, f"{where}: instance_types.{name}")
        if entry.get("gpu") not in gpus:
            raise FactsError(f"{where}: instance_types.{name}.gpu {entry.get('gpu')!r} is not under gpus")
        unconfirmed = set(map(str, entry.get("unconfirmed") or []))
        if entry.get("confirmed") is not True:
            unconfirmed = unconfirmed or {"*"}
        store = entry.get("instance_store_gb")
        types[str(name)] = InstanceType(
            str(name),
            str(entry["gpu"]),
            int(entry["gpus"]),
            float(entry["host_gib"]),
            None if store is None else int(store),
            frozenset(unconfirmed),
            source(entry.get("source"), f"instance_types.{name}"),
            str(entry.get("note") or ""),
        )
    return gpus, types


def gpus() -> dict[str, Gpu]:
    return _instances_file()[0]


def instance_types() -> dict[str, InstanceType]:
    return _instances_file()[1]


def instance_type(name: Any) -> InstanceType | None:
    """An instance type's facts, named with or without SageMaker's `ml.` prefix."""
    text = str(name or "")
    types = instance_types()
    return types.get(text) or types.get(f"ml.{text}")


def unconfirmed_instance(name: Any, fields: Iterable[str], gpu_figures: bool = False) -> str:
    """What an instance-type judgement rests on that is not confirmed (empty: all confirmed), in words."""
    found = instance_type(name)
    if found is None:
        return ""
    parts = [f"{found.name}'s {field}" for field in found.unconfirmed_of(fields)]
    gpu = gpus()[found.gpu]
    if gpu_figures and not gpu.confirmed:
        parts.append(f"the {gpu.name}'s memory and compute capability")
    return ", ".join(parts)


def doubts(*parts: str) -> str:
    """Several judgements' unconfirmed facts in one phrase (empty parts left out)."""
    return "; ".join(p for p in parts if p)


CURVINE_READ = HERE / "curvine_read.yaml"
# curvine_read.yaml's read settings: Curvine's [client] keys, each entry's own.
CURVINE_READ_SETTINGS = ("read_chunk_size", "read_chunk_num", "read_parallel")


@dataclass(frozen=True)
class CurvineRead:
    """Curvine's measured read speed under one client read setting (curvine_read.yaml, one entry)."""

    name: str
    settings: dict[str, str]  # CURVINE_READ_SETTINGS -> the value as Curvine's config reads it
    cross_node_gib_s: tuple[float, float]  # (slowest, fastest) run; a single figure is both
    same_node_gib_s: tuple[float, float] | None
    stand_in_gib_s: tuple[float, float] | None
    measured: str  # YYYY-MM-DD
    command: str
    machine: str
    preliminary: bool

    @property
    def source(self) -> str:
        """Where the figure comes from, in words: the file, the entry, the date, how and on what."""
        early = ", preliminary" if self.preliminary else ""
        return (
            f"{CURVINE_READ.name} {self.name}{early}: measured {self.measured} by {self.command}, "
            f"on {self.machine}"
        )


def _speeds(value: Any, where: str) -> tuple[float, float] | None:
    """A speed in GiB/s, or a [slowest, fastest] range of runs; null: not measured."""
    if value is None:
        return None
    figures = value if isinstance(value, list) else [value]
    if not (1 <= len(figures) <= 2) or not all(
        isinstance(f, int | float) and not isinstance(f, bool) and f > 0 for f in figures
    ):
        raise FactsError(f"{where}: expected a positive GiB/s or [slowest, fastest], found {value!r}")
    low, high = float(min(figures)), float(max(figures))
    return low, high


@cache
def curvine_reads() -> dict[str, CurvineRead]:
    """Every measured Curvine read setting by entry name, in the file's order."""
    data = _read(CURVINE_READ)
    out: dict[str, CurvineRead] = {}
    for name, raw in _mapping(data.get("settings"), f"{CURVINE_READ}: settings").items():
        where = f"{CURVINE_READ}: settings.{name}"
        entry = _mapping(raw, where)
        missing = [k for k in (*CURVINE_READ_SETTINGS, "cross_node_gib_s", "measured", "command", "machine")
                   if entry.get(k) in (None, "")]  # fmt: skip
        if missing:
            raise FactsError(f"{where}: needs {', '.join(missing)}")
        cross = _speeds(entry["cross_node_gib_s"], f"{where}.cross_node_gib_s")
        assert cross is not None  # present: checked above
        out[str(name)] = CurvineRead(
            str(name),
            {k: str(entry[k]) for k in CURVINE_READ_SETTINGS},
            cross,
            _speeds(entry.get("same_node_gib_s"), f"{where}.same_node_gib_s"),
            _speeds(entry.get("stand_in_gib_s"), f"{where}.stand_in_gib_s"),
            str(entry["measured"]),
            str(entry["command"]),
            str(entry["machine"]),
            entry.get("preliminary") is True,
        )
    if not out:
        raise FactsError(f"{CURVINE_READ}: settings lists no measured read setting")
    return out
