"""Scale on paper (`kvtier plan --scale`): the shared L2 at many replicas and several Curvine workers.

Per request of a measured mix (a `kvtier load` run, or the real node's shipped figures):
    read bytes  = prompt tokens x L2 share x KV bytes per token      (the hits the connector served)
    write bytes = prompt tokens x computed share x KV bytes per token (each computed chunk is stored once)
A worker serves at most min(its NVMe, its NIC); the pool is sized to TARGET_UTILIZATION of that, because
reads queue as a disk or link nears full (an M/M/1 queue at 70 % busy waits 2.3x the service time).
Reads are counted against the NIC (the connector reads across nodes), reads and writes against the disk.
The replicas' own ceiling is prefill-bound unless a measured one is given: replicas x prefill rate /
computed tokens per request (decode and batching are not modelled, so it is an upper bound on what the
replicas can ask of L2).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kvtier.errors import UserError
from kvtier.plan import capacity
from kvtier.plan.capacity import Deployment, Timing
from kvtier.plan.facts import GIB, MEASURED_MIX

TARGET_UTILIZATION = 0.7
GBIT = 1e9 / 8  # bytes per second in one Gbit/s (network units are decimal)
CHUNK_SIZES = (128, 256, 512, 1024)


@dataclass(frozen=True)
class Mix:
    """Where a request's prompt tokens come from: L0, the connector (L1 + L2), or prefill."""

    prompt_tokens: float
    l0_share: float
    connector_share: float
    source: str

    @property
    def computed_share(self) -> float:
        return max(0.0, 1.0 - self.l0_share - self.connector_share)

    def worst_case(self) -> Mix:
        """Every reused token read from L2: many replicas behind a spreading router, none held in L0."""
        return Mix(
            self.prompt_tokens,
            0.0,
            self.l0_share + self.connector_share,
            f"{self.source}, L0 share moved to L2",
        )


def shipped_mix() -> Mix:
    m = MEASURED_MIX
    return Mix(m.prompt_tokens, m.l0_share, m.connector_share, m.source)


def mix_from_load(path: Path) -> Mix:
    """The mix a `kvtier load` run measured: its points' prompt and hit tokens summed (load.json)."""
    try:
        rows = json.loads(path.read_text())["rows"]
        counted = [r for r in rows if r.get("connector_hit_tokens") is not None and r["completed"]]
        prompt = sum(float(r["prompt_tokens"]) for r in counted)
        l0 = sum(float(r["l0_hit_tokens"] or 0) for r in counted)
        connector = sum(float(r["connector_hit_tokens"]) for r in counted)
        completed = sum(int(r["completed"]) for r in counted)
    except OSError as error:
        raise UserError(f"--load {path}: cannot read it ({error.strerror})") from None
    except (ValueError, KeyError, TypeError, AttributeError):
        raise UserError(
            f"--load {path}: not a load.json of `kvtier load` (expected rows with prompt_tokens, "
            "l0_hit_tokens, connector_hit_tokens and completed)"
        ) from None
    if not counted or prompt <= 0:
        raise UserError(
            f"--load {path}: no point counted connector hits (an L0-only run, or engines without metrics); "
            "run `kvtier load` against a release with L1/L2 on"
        )
    mix = Mix(prompt / completed, l0 / prompt, connector / prompt, f"{path}: {completed} requests")
    if min(mix.l0_share, mix.connector_share) < 0 or mix.l0_share + mix.connector_share > 1:
        raise UserError(
            f"--load {path}: its hit tokens (L0 {l0:,.0f}, L1/L2 {connector:,.0f}) are not within its "
            f"{prompt:,.0f} prompt tokens; give the load.json `kvtier load` wrote, unedited"
        )
    return mix


@dataclass(frozen=True)
class Hardware:
    worker_disk_gib_s: float  # one worker's NVMe read rate
    nic_gbps: float  # every node's NIC, Curvine workers and GPU nodes alike
    assumed: bool  # defaults rather than the user's figures

    @property
    def nic_gib_s(self) -> float:
        return self.nic_gbps * GBIT / GIB

    @property
    def worker_gib_s(self) -> float:
        return min(self.worker_disk_gib_s, self.nic_gib_s)


@dataclass(frozen=True)
class Demand:
    """Bytes one request reads from and writes to L2, and what one replica can serve."""

    read_bytes: float
    write_bytes: float
    replica_qps: float | None  # None: no prefill left to bound it (every token a hit)
    replica_qps_source: str

    @classmethod
    def of(cls, mix: Mix, bpt: int, timing: Timing, replica_qps: float | None) -> Demand:
        computed = mix.prompt_tokens * mix.computed_share
        if replica_qps is not None:
            qps, source = replica_qps, "measured (--replica-qps)"
        elif computed > 0:
            qps, source = timing.prefill_tps / computed, f"prefill-bound: {timing.prefill_tps:,.0f} tokens/s"
        else:
            qps, source = None, "not prefill-bound (no token computed)"
        return cls(mix.prompt_tokens * mix.connector_share * bpt, computed * bpt, qps, source)

    def fleet_qps(self, replicas: int) -> float:
        """What `replicas` replicas can serve (unbounded when nothing bounds one replica)."""
        return replicas * self.replica_qps if self.replica_qps is not None else math.inf

    def l2_saturation_qps(self, workers: int, hw: Hardware) -> float:
        """Fleet QPS at which the pool reaches TARGET_UTILIZATION of its disks or NICs."""
        disk = workers * hw.worker_disk_gib_s * GIB * TARGET_UTILIZATION
        nic = workers * hw.nic_gib_s * GIB * TARGET_UTILIZATION
        bounds = [disk / (self.read_bytes + self.write_bytes)] if self.read_bytes + self.write_bytes else []
        bounds += [nic / self.read_bytes] if self.read_bytes else []
        return min(bounds) if bounds else math.inf

    def workers_for(self, qps: float, hw: Hardware) -> int | None:
        """Workers that keep the pool at TARGET_UTILIZATION at `qps` (None: no finite number does)."""
        disk = qps * (self.read_bytes + self.write_bytes) / (hw.worker_disk_gib_s * GIB * TARGET_UTILIZATION)
        nic = qps * self.read_bytes / (hw.nic_gib_s * GIB * TARGET_UTILIZATION)
        need = max(disk, nic)
        return max(1, math.ceil(need - 1e-9)) if math.isfinite(need) else None


def finite(value: float | None) -> float | None:
    """JSON has no infinity: an unbounded figure is None ("-" in the table)."""
    return value if value is not None and math.isfinite(value) else None


def rows(demand: Demand, hw: Hardware, replicas: list[int], workers: list[int]) -> list[dict[str, Any]]:
    """One row per (replicas, workers): who saturates first, at what fleet QPS, and the workers to add."""
    out = []
    for r in replicas:
        fleet = demand.fleet_qps(r)
        for w in workers:
            l2 = demand.l2_saturation_qps(w, hw)
            at = min(fleet, l2)
            out.append(
                {
                    "replicas": r,
                    "workers": w,
                    "replicas_qps": finite(fleet),
                    "l2_saturation_qps": finite(l2),
                    "bottleneck": "L2" if l2 < fleet else "replicas",
                    "l2_read_gib_s": finite(at * demand.read_bytes / GIB),
                    "l2_write_gib_s": finite(at * demand.write_bytes / GIB),
                    "workers_needed": demand.workers_for(fleet, hw),
                    "replica_nic_share": finite(
                        (demand.replica_qps or math.inf) * demand.read_bytes / (hw.nic_gib_s * GIB)
                    ),
                }
            )
    return out


def break_even_stream_gib_s(bpt: int, timing: Timing) -> float:
    """Below this read rate per request, recomputing the tokens is faster than reading their KV from L2."""
    return bpt * timing.prefill_tps / GIB


def chunk_rows(d: Deployment, mix: Mix, fleet_qps: float) -> list[dict[str, Any]]:
    """Chunk size trade-off: files (and file opens) per request against reuse lost inside a chunk. A prompt
    that diverges from a cached one part-way through a chunk cannot reuse that chunk (its hash differs):
    half a chunk on average when the divergence point is uniform (the rig's mix aligns its blocks to chunks,
    so it shows none of this)."""
    touched = mix.prompt_tokens * (mix.connector_share + mix.computed_share)
    return [
        {
            "chunk_tokens": c,
            "file_bytes": capacity.chunk_file_bytes(replace(d, chunk=c)),
            "files_per_request": touched / c,
            "file_ops_per_s": finite(fleet_qps * touched / c),
            "reuse_lost_share": min(1.0, c / 2 / mix.prompt_tokens),
        }
        for c in CHUNK_SIZES
    ]


def build(
    d: Deployment, mix: Mix, timing: Timing, hw: Hardware, replicas: list[int], workers: list[int],
    replica_qps: float | None,
) -> dict[str, Any]:  # fmt: skip
    bpt = d.model.kv_bytes_per_token(d.kv_dtype_bytes)
    worst = mix.worst_case()
    measured = Demand.of(mix, bpt, timing, replica_qps)
    cases = {}
    for name, m, demand in (
        ("measured", mix, measured),
        ("worst", worst, Demand.of(worst, bpt, timing, replica_qps)),
    ):
        table = rows(demand, hw, replicas, workers)
        cases[name] = {
            "mix": {**m.__dict__, "computed_share": m.computed_share},
            "read_mib_per_request": demand.read_bytes / 2**20,
            "write_mib_per_request": demand.write_bytes / 2**20,
            "replica_qps": finite(demand.replica_qps),
            "replica_qps_source": demand.replica_qps_source,
            "rows": table,
        }
    largest = max(replicas)
    break_even = break_even_stream_gib_s(bpt, timing)
    return {
        "hardware": {
            "worker_disk_gib_s": hw.worker_disk_gib_s,
            "nic_gbps": hw.nic_gbps,
            "worker_gib_s": hw.worker_gib_s,
            "assumed": hw.assumed,
            "target_utilization": TARGET_UTILIZATION,
        },
        "break_even_stream_gib_s": finite(break_even),
        # concurrent L2 reads each pool size keeps at or above that rate (below it, recomputing is faster)
        "reads_above_break_even": {
            w: math.floor(w * hw.worker_gib_s * TARGET_UTILIZATION / break_even) for w in workers
        },
        "cases": cases,
        "chunks": {"replicas": largest, "rows": chunk_rows(d, mix, measured.fleet_qps(largest))},
    }
