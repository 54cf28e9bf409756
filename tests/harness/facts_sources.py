"""Seeded draws of a model and where `kvtier validate` finds its config.json (kvtier.validate.model_facts),
for the differential test of the model-shape rules against vLLM fed the same config
(harness/engine/model_shape_probe.py).

Each draw is one of the shipped configs (real config.json figures with their sources, tools/kvtier/facts/
models/*.yaml) reached through one source:
- hub: served by the stand-in Hub (harness/hub_stand_in.py) under a name kvtier ships nothing for, read at a
  pinned revision;
- shipped: the model's own name, offline: kvtier's shipped facts;
- given: a name nothing else knows, with `--model-config NAME=PATH`;
- unknown: a name nothing knows, offline: validate has no facts (and must say so).
with a tensor parallel size and a maxModelLen drawn around the config's head count and position limit.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from harness.hub_stand_in import commit_of, shipped_config
from kvtier import facts

SOURCES = ("hub", "shipped", "given", "unknown")
TENSOR_PARALLEL = [1, 2, 3, 4, 6, 8]


@dataclass(frozen=True)
class Draw:
    source: str
    short: str  # the shipped facts file's name
    name: str  # models[].model
    config: dict[str, Any]
    tensor_parallel: int
    max_model_len: int
    revision: str

    def model(self) -> dict[str, Any]:
        """The models[] keys the draw sets."""
        return {
            "model": self.name,
            "gpusPerReplica": self.tensor_parallel,
            "maxModelLen": self.max_model_len,
        }


def _lengths(config: dict[str, Any]) -> list[int]:
    limit = config.get("max_position_embeddings")
    if not isinstance(limit, int) or limit <= 0:
        return [512, 4096, 131072]
    return [512, limit // 2, limit - 1, limit, limit + 1, 2 * limit]


def draw(rng: random.Random, count: int) -> list[Draw]:
    """`count` draws, the sources in turn (so each is drawn about as often)."""
    shorts = sorted(facts.models())
    found = []
    for i in range(count):
        source = SOURCES[i % len(SOURCES)]
        short = rng.choice(shorts)
        config = shipped_config(short)
        name = facts.models()[short].ids[0] if source == "shipped" else f"kvtier-{source}/{short}-{i}"
        found.append(
            Draw(
                source,
                short,
                name,
                config,
                rng.choice(TENSOR_PARALLEL),
                rng.choice(_lengths(config)),
                commit_of("pinned", name),
            )
        )
    return found
