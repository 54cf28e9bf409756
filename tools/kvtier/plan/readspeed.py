"""The L2 read speed an environment gets: the reference deployment's and this bundle's measured one.

Curvine's cross-node read speed depends on its client read settings (charts/curvine `config.read`:
chunkSize, chunkNum, parallel, rendered into curvine-cluster.toml's [client]). kvtier.facts.curvine_reads
holds one measured entry per setting (tools/kvtier/facts/curvine_read.yaml); the entry whose settings equal
the environment's applies, else the entry of Curvine's defaults, and the figure says which.

The figure used is the fastest run of the entry: the runs shared a 2-core VM with other work, so a slower
run carries its neighbours' load; and a warning built on it (l2-read-slower-than-recompute) fires only where
even the best measured read loses. docs/performance.md, "The L2 read speed the plan assumes".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvtier import facts
from kvtier.plan.facts import REFERENCE
from kvtier.upstream import curvine_config
from kvtier.values import lookup

# Curvine v0.4.1's ClientConf defaults (crates/common/curvine-config/src/client_conf.rs; issue 63), which
# apply where the values set nothing.
CURVINE_DEFAULTS = {"read_chunk_size": "128KB", "read_chunk_num": "8", "read_parallel": "1"}
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


def settings_of(values: dict[str, Any] | None) -> dict[str, str]:
    """The environment's Curvine client read settings; Curvine's defaults for those it does not set."""
    out = dict(CURVINE_DEFAULTS)
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
        unmeasured = "" if self.exact else f" (no entry measured {setting}: the figure of Curvine's defaults)"
        return f"Curvine v0.4.1 cross-node read, measured ({runs}; {self.entry.source}){unmeasured}; {CAVEAT}"


def measured_read(values: dict[str, Any] | None = None) -> MeasuredRead:
    """The measured entry for the environment's read settings (none given: Curvine's defaults)."""
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
    defaults = matching(CURVINE_DEFAULTS)
    if defaults is None:
        raise facts.FactsError(
            f"{facts.CURVINE_READ}: no entry measured Curvine's defaults {CURVINE_DEFAULTS}"
        )
    return MeasuredRead(defaults, wanted, False)
