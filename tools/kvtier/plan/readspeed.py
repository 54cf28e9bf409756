"""The L2 read speed an environment gets: the reference deployment's and this bundle's measured one.

Curvine's cross-node read speed depends on its client read settings (charts/curvine `config.read`:
chunkSize, chunkNum, parallel, rendered into curvine-cluster.toml's [client]). kvtier.facts.curvine_reads
holds one measured entry per setting (tools/kvtier/facts/curvine_read.yaml); the entry whose settings equal
the environment's applies, else the entry of the chart's defaults, and the figure says which. A setting the
values leave out is the chart's default (its values.yaml), which is what curvine-cluster.toml then holds: the
chart renders every one of these keys, so Curvine's own defaults never apply.

The figure used is the fastest run of the entry: the runs shared a 2-core VM with other work, so a slower
run carries its neighbours' load; and a warning built on it (l2-read-slower-than-recompute) fires only where
even the best measured read loses. docs/performance.md, "The L2 read speed the plan assumes".
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import yaml

from kvtier import facts, paths
from kvtier.plan.facts import REFERENCE
from kvtier.upstream import curvine_config
from kvtier.values import lookup

CHART_VALUES = paths.CHARTS / "curvine" / "values.yaml"
# Where the values set each one (charts/curvine values.yaml, under curvine. in the umbrella's values).
VALUES_KEYS = {
    "read_chunk_size": ("curvine", "config", "read", "chunkSize"),
    "read_chunk_num": ("curvine", "config", "read", "chunkNum"),
    "read_parallel": ("curvine", "config", "read", "parallel"),
}
CAVEAT = "not a production NVMe/EFA network"
MEASURE_YOURS = (
    "measure yours with `kvtier bench --release <name>` (replicas on two nodes: an L2 hit against a cold "
    "prefill) and give it as --read-gib-s"
)
REFERENCE_SOURCE = (
    f"the reference deployment: {REFERENCE.read_tokens:,} tokens' KV read across nodes in "
    f"{REFERENCE.read_ms} ms (DESIGN.md section 1)"
)


def _same(key: str, a: str, b: str) -> bool:
    if key == "read_chunk_size":
        return curvine_config.size_bytes(a) == curvine_config.size_bytes(b)
    return a.strip() == b.strip()


@cache
def chart_defaults() -> dict[str, str]:
    """The read settings charts/curvine renders where the values set none (its values.yaml)."""
    chart = yaml.safe_load(CHART_VALUES.read_text())
    return {key: str(lookup(chart, *path[1:])) for key, path in VALUES_KEYS.items()}


def settings_of(values: dict[str, Any] | None) -> dict[str, str]:
    """The environment's Curvine client read settings; the chart's defaults for those it does not set."""
    out = dict(chart_defaults())  # a copy: the cached dict stays the chart's
    for key, path in VALUES_KEYS.items():
        value = lookup(values or {}, *path)
        if value not in (None, ""):
            out[key] = str(value)
    return out


@dataclass(frozen=True)
class MeasuredRead:
    entry: facts.CurvineRead
    settings: dict[str, str]  # the environment's
    exact: bool  # the entry measured these settings; else the defaults' entry stands in for them

    @property
    def gib_s(self) -> float:
        return self.entry.cross_node_gib_s[1]

    def describe(self) -> str:
        """The figure, its range, where and when it was measured, and what it is not."""
        low, high = self.entry.cross_node_gib_s
        runs = f"fastest of {low:g}-{high:g} GiB/s" if low != high else f"{high:g} GiB/s"
        setting = ", ".join(f"{k} {v}" for k, v in self.settings.items())
        unmeasured = "" if self.exact else f" (no entry measured {setting}: the chart defaults' figure)"
        return f"Curvine v0.4.1 cross-node read, measured ({runs}; {self.entry.source}){unmeasured}; {CAVEAT}"


def measured_read(values: dict[str, Any] | None = None) -> MeasuredRead:
    """The measured entry for the environment's read settings (none given: the chart's defaults)."""
    wanted = settings_of(values)
    entries = facts.curvine_reads()

    def matching(settings: dict[str, str]) -> facts.CurvineRead | None:
        return next(
            (e for e in entries.values() if all(_same(k, e.settings[k], v) for k, v in settings.items())),
            None,
        )

    found = matching(wanted)
    if found is not None:
        return MeasuredRead(found, wanted, True)
    defaults = matching(chart_defaults())
    if defaults is None:
        raise facts.FactsError(
            f"{facts.CURVINE_READ}: no entry measured the defaults of {CHART_VALUES} {chart_defaults()}"
        )
    return MeasuredRead(defaults, wanted, False)
