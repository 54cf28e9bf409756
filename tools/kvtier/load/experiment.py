"""Tier sets x routings x a QPS sweep on the CPU rig, in one run: the load benchmark's matrix.

Per tier set the rig starts `replicas` engines from values/cpu.yaml's rendered container (kvtier.engine_rig
.tiers) with L0 capped (RIG_L0_BLOCKS), so the mix's working set outgrows L0 as it outgrows GPU memory on a
real deployment; otherwise a CPU replica's gigabyte of KV cache would hold everything and L1/L2 would never
be asked. Per QPS point, every routing gets its own router replicas (fresh router state) and its own
prompts (a new id_base), so no point is warmed by another; routings alternate within a QPS so slow drift of
a shared machine falls on all of them alike.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig import tiers as tier_rig
from kvtier.load import driver, report, routing, summary, workload

RIG_REPLICAS = 3
ROUTER_REPLICAS = 2  # the chart's router.replicas default
RIG_L0_BLOCKS = 96  # x 128-token blocks = 12,288 tokens of L0 per replica: about three long sessions
RIG_MAX_PROMPT = 3072  # the rig's context is 4,096 tokens; a session stops growing before it
RIG_NOTE = (
    "CPU rig: the replicas share this machine's cores, so a replica that gets more requests is not slower "
    "for it the way a GPU replica is; docs/performance.md"
)


@dataclass(frozen=True)
class Matrix:
    configurations: Sequence[tuple[str, str]]  # (tier set, routing), run grouped by tier set
    qps: Sequence[float]
    mix: workload.Mix
    slo_ttft_ms: float
    replicas: int = RIG_REPLICAS
    router_replicas: Sequence[int] = (ROUTER_REPLICAS,)  # several: how much router replicas disagree costs
    l0_blocks: int = RIG_L0_BLOCKS


class FreshPrompts:
    """The mix again with new hash ids each time, so no point of a sweep is warmed by an earlier one."""

    def __init__(self, mix: workload.Mix) -> None:
        self.mix, self.next_id = mix, mix.id_base

    def take(self) -> tuple[workload.Mix, list[workload.Request]]:
        mix = replace(self.mix, id_base=self.next_id)
        requests = workload.generate(mix)
        self.next_id += workload.ids_used(mix, requests)
        return mix, requests


def measure(
    target: driver.Target, prompts: FreshPrompts, qps: float, work_dir: Path, slo_ttft_ms: float
) -> dict[str, Any]:
    """One point: fresh prompts of the mix at `qps` through the target's routers, summarized."""
    mix, requests = prompts.take()
    point = driver.run_point(engine_rig.engine_python(), target, requests, mix, qps, work_dir)
    return summary.summarize(point, slo_ttft_ms)


def run(matrix: Matrix, work_dir: Path, log: Callable[[str], None]) -> list[dict[str, Any]]:
    """One summary row per (tier set, routing, router replicas, QPS), and its router flags' origin."""
    rows: list[dict[str, Any]] = []
    prompts = FreshPrompts(matrix.mix)
    # Each routing's flags are rendered once (a `helm template`), not once per point.
    rendered = {name: routing.flags(name) for name in dict.fromkeys(n for _, n in matrix.configurations)}
    tier_sets = list(dict.fromkeys(tier_set for tier_set, _ in matrix.configurations))
    for tier_set in tier_sets:
        names = [name for tiers_, name in matrix.configurations if tiers_ == tier_set]
        rig_dir = work_dir / tier_set.replace("+", "-")
        engine_args = ("--num-gpu-blocks-override", str(matrix.l0_blocks))
        with tier_rig.TieredRig(
            rig_dir, replicas=matrix.replicas, tiers=tier_set, engine_args=engine_args, log=log
        ) as rig:
            engines = [p.url for p in rig.started]
            tokenizer = str(rig_dir / "models" / engine_rig.MODEL_NAME)
            for qps, name, count in itertools.product(matrix.qps, names, matrix.router_replicas):
                router_flags, source = rendered[name]
                with routing.routers(name, router_flags, engines, count, rig_dir) as urls:
                    target = driver.Target(urls, engine_rig.MODEL_NAME, tokenizer, engines, offline=True)
                    row = measure(target, prompts, qps, rig_dir / f"{name}-{count}", matrix.slo_ttft_ms)
                row |= {"tiers": tier_set, "routing": name, "router_replicas": count, "router_flags": source}
                rows.append(row)
                log(report.line(row))
    return rows
