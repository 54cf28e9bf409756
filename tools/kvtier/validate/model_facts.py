"""Where `kvtier validate` finds what it knows of a model: heads, position limit, dtype, weight bytes, gating.

In order, for each models[] entry:
1. a `--model-config MODEL=PATH` the user gave (a config.json, or a folder holding one and, optionally,
   model.safetensors.index.json);
2. the model itself, when `model` names a folder on this machine (vLLM serves a local path the same way);
3. the Hugging Face Hub at source.huggingface.revision (else main), as vLLM's loader reads it
   (kvtier.validate.hub_facts: HF_ENDPOINT, HF_TOKEN; not asked when HF_HUB_OFFLINE is set);
4. the local Hugging Face cache (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub, as
   huggingface_hub lays it out, and where step 3 stores what it read): the snapshot of
   source.huggingface.revision, else of refs/main;
5. the shipped configs (kvtier.facts, models/*.yaml), each key confirmed or not against its published file;
6. a `--model-config PATH` given without MODEL=: it stands for every model nothing above describes.
A file that cannot be read is a usage error when the user named it, and is passed over (the next source is
asked, and model-facts-source says so) when it came from the Hub or a cache. `look_up` tells the whole story
(which source, what the Hub said); `find` gives the facts alone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from kvtier import facts, inputfiles
from kvtier.errors import UserError
from kvtier.plan import model_config
from kvtier.plan.capacity import known_config
from kvtier.validate import hub_facts
from kvtier.values import lookup

CONFIG = "config.json"
INDEX = "model.safetensors.index.json"
ANY_MODEL = ""  # the key of a --model-config given without MODEL=
HOW_TO_SUPPLY = (
    "let validate reach the Hub (HF_HUB_OFFLINE unset; HF_ENDPOINT for a mirror; HF_TOKEN for a gated or "
    "private repository), or give its config.json with `--model-config MODEL=PATH` (a config.json or the "
    "model's folder, whose model.safetensors.index.json adds the weight bytes)"
)
# Where a model's facts came from: a file the user named (given, any), the model's own folder (local), the
# Hub (hub), the local Hugging Face cache (cache) or kvtier's shipped facts (shipped).
Kind = Literal["given", "local", "hub", "cache", "shipped", "any"]


@dataclass(frozen=True)
class ModelFacts:
    name: str  # what messages call the model
    config: dict[str, Any]  # config.json's fields (a multimodal config's text_config), checked, with the
    # defaults of its transformers config class for keys it leaves out (model_config.with_class_defaults)
    origin: str  # "shipped", or the file the facts were read from
    weight_bytes: int | None = None  # model.safetensors.index.json metadata.total_size, as stored
    gated: bool | None = None  # the Hub's licence gate, where the shipped facts give it (Lookup.gated: also
    # what the Hub said)
    # shipped config keys not confirmed against the published config.json ("*": none); a user's file: none
    unconfirmed: frozenset[str] = frozenset()
    kind: Kind = "given"

    def __post_init__(self) -> None:
        object.__setattr__(self, "config", model_config.with_class_defaults(self.config))

    def rests_on(self, *keys: str) -> str:
        """Which of `keys` a judgement takes from an unconfirmed shipped figure, in words ("" if none)."""
        doubtful = [k for k in keys if k in self.config and {"*", k} & self.unconfirmed]
        return f"{self.name}'s shipped {', '.join(doubtful)}" if doubtful else ""

    @property
    def quantized(self) -> bool:
        """Weights stored quantized: their bytes follow the quantization, not torch_dtype."""
        return bool(self.config.get("quantization_config"))


def parse_flag(text: str) -> tuple[str, Path]:
    """(model id or ANY_MODEL, path) of one `--model-config [MODEL=]PATH`, the path checked now (exit 2)."""
    model, sep, path_text = text.partition("=")
    if not sep:
        model, path_text = ANY_MODEL, text
    if not path_text:
        raise UserError(f"--model-config {text!r}: expected [MODEL=]PATH of a config.json or a model folder")
    path = Path(path_text)
    read_given(path)  # a file the user named must be readable: say so before any rendering
    return model.strip(), path


@lru_cache(maxsize=64)
def read_given(path: Path) -> tuple[dict[str, Any], int | None]:
    """(config, weight bytes) of a config.json or a model folder the user named; UserError otherwise."""
    folder = path if path.is_dir() else path.parent
    config_file = path / CONFIG if path.is_dir() else path
    if not config_file.is_file():
        raise UserError(
            f"--model-config {path}: no {CONFIG} there; expected a Hugging Face config.json or a folder "
            "holding one"
        )
    config = model_config.read(config_file)
    index = folder / INDEX if path.is_dir() or path.name == CONFIG else None
    return config, _total_size(index) if index else None


def _total_size(index: Path) -> int | None:
    """metadata.total_size of a safetensors index (bytes of every tensor as stored), if readable."""
    if not index.is_file():
        return None  # absent, or a FIFO or device a read would hang on
    try:
        data = json.loads(inputfiles.read_text(index, "safetensors index (model.safetensors.index.json)"))
    except (UserError, json.JSONDecodeError, RecursionError):
        return None
    total = lookup(data, "metadata", "total_size") if isinstance(data, dict) else None
    if isinstance(total, bool) or not isinstance(total, int | float) or total <= 0:
        return None
    return int(total)


@lru_cache(maxsize=64)
def _read_found(folder: Path) -> tuple[dict[str, Any], int | None] | None:
    """(config, weight bytes) of a folder found on the way (a local model, a cache snapshot), if readable."""
    try:
        config = model_config.read(folder / CONFIG)
    except UserError:
        return None
    return config, _total_size(folder / INDEX)


def hub_cache() -> Path:
    """The Hugging Face cache folder huggingface_hub would use (its constants.py: HF_HUB_CACHE, HF_HOME)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(cache) / "huggingface" / "hub"


def cached_snapshot(repo_id: str, revision: str | None = None) -> Path | None:
    """The cache's snapshot folder of a repository at a commit, a branch or tag (refs/<name>), or main."""
    if repo_id.count("/") != 1 or ".." in repo_id:
        return None
    repo = hub_cache() / ("models--" + repo_id.replace("/", "--"))
    snapshots = repo / "snapshots"
    for wanted in (revision, "main"):
        if not wanted:
            continue
        if (snapshots / wanted / CONFIG).is_file():
            return snapshots / wanted
        ref = repo / "refs" / wanted
        try:
            commit = ref.read_text(encoding="utf-8").strip() if ref.is_file() else ""
        except (OSError, UnicodeDecodeError):
            commit = ""
        if commit and (snapshots / commit / CONFIG).is_file():
            return snapshots / commit
    return None


@dataclass(frozen=True)
class Lookup:
    """What is known of one models[] entry, and how it was found."""

    facts: ModelFacts | None
    hub: hub_facts.Answer | None = None  # what the Hub said; None: not asked (a given file or folder won)
    hub_unreadable: str = ""  # the Hub served a config.json validate cannot read: why

    @property
    def gated(self) -> bool | None:
        """The licence gate: as the Hub answered validate, else as the shipped facts say."""
        if self.hub is not None and self.hub.gated is not None:
            return self.hub.gated
        return self.facts.gated if self.facts else None


def find(model: Mapping[str, Any], given: Mapping[str, Path]) -> ModelFacts | None:
    """What is known of one models[] entry, from the first source that has it (the module's order)."""
    return look_up(model, given).facts


def look_up(model: Mapping[str, Any], given: Mapping[str, Path]) -> Lookup:
    """The facts of one models[] entry from the first source that has them, with what the Hub said."""
    name = str(model.get("model") or "")
    if not name:
        return Lookup(None)
    if name in given:
        return Lookup(_given(name, given[name]))
    local = Path(name)
    if local.is_absolute() and (local / CONFIG).is_file():
        found = _read_found(local)
        if found:
            return Lookup(ModelFacts(name, found[0], str(local / CONFIG), found[1], kind="local"))
    revision = lookup(model, "source", "huggingface", "revision")
    revision = str(revision) if revision else None
    hub = hub_facts.fetch(name, revision, hub_cache())
    unreadable = ""
    if hub.outcome == "read" and hub.folder is not None:
        found = _read_found(hub.folder)
        if found:
            gated = hub.gated if hub.gated is not None else _shipped_gated(name)
            return Lookup(ModelFacts(name, found[0], hub.url, found[1], gated, kind="hub"), hub)
        unreadable = _why_unreadable(hub.folder / CONFIG)
    return Lookup(_after_the_hub(name, revision, given), hub, unreadable)


def _after_the_hub(name: str, revision: str | None, given: Mapping[str, Path]) -> ModelFacts | None:
    snapshot = cached_snapshot(name, revision)
    if snapshot:
        found = _read_found(snapshot)
        if found:
            return ModelFacts(name, found[0], str(snapshot / CONFIG), found[1], kind="cache")
    shipped = known_config(name)
    if shipped:
        short, config = shipped
        entry = facts.models()[short]
        return ModelFacts(short, config, "shipped", None, entry.gated, entry.unconfirmed, kind="shipped")
    if ANY_MODEL in given:
        return _given(name, given[ANY_MODEL], kind="any")
    return None


def _shipped_gated(name: str) -> bool | None:
    shipped = known_config(name)
    return facts.models()[shipped[0]].gated if shipped else None


def _why_unreadable(config_file: Path) -> str:
    try:
        model_config.read(config_file)
    except UserError as error:
        return " ".join(str(error).split())
    return "unreadable"


def _given(name: str, path: Path, kind: Kind = "given") -> ModelFacts:
    config, weights = read_given(path)
    return ModelFacts(name, config, str(path), weights, kind=kind)
