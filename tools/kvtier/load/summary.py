"""A load point summarized as load curves are compared, and the comparisons issue 37 asks for.

Percentiles are numpy's default (linear interpolation), the method `vllm bench serve` prints with. Goodput
follows vLLM's definition for a TTFT-only SLO: completed requests whose TTFT met it, per second of the run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from kvtier.load.driver import PERCENTILES, Point


def percentiles(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {f"p{p}": None for p in PERCENTILES}
    found = np.percentile(np.asarray(values, dtype=float), PERCENTILES)
    return {f"p{p}": float(v) * 1000 for p, v in zip(PERCENTILES, found, strict=True)}


def summarize(point: Point, slo_ttft_ms: float) -> dict[str, Any]:
    done = [r for r in point.records if r["ok"]]
    duration = point.duration_s or float("inf")
    prompt_tokens = sum(r["input_length"] for r in done)
    tiers = point.tiers
    return {
        "qps": point.qps,
        "requests": len(point.records),
        "completed": len(done),
        "failed": len(point.records) - len(done),
        "duration_s": point.duration_s,
        "throughput_rps": len(done) / duration,
        "output_tokens_per_s": sum(r["output_tokens"] for r in done) / duration,
        "goodput_rps": sum(1 for r in done if r["ttft_s"] * 1000 <= slo_ttft_ms) / duration,
        "ttft_ms": percentiles([r["ttft_s"] for r in done]),
        "itl_ms": percentiles([gap for r in done for gap in r["itl_s"]]),
        "prompt_tokens": prompt_tokens,
        "l0_hit_tokens": tiers.get("l0_hit_tokens"),
        "connector_hit_tokens": tiers.get("external_hit_tokens"),
        "hit_share": {
            "l0": _share(tiers.get("l0_hit_tokens"), prompt_tokens),
            "l1_l2": _share(tiers.get("external_hit_tokens"), prompt_tokens),
        },
        "by_router": _by_router(done),
        "by_engine": point.engine_requests,
    }


def _share(tokens: float | None, total: int) -> float | None:
    return None if tokens is None or total == 0 else tokens / total


def _by_router(done: list[dict[str, Any]]) -> dict[str, int]:
    return dict(Counter(str(record["router"]) for record in done))


def throughput_at_slo(rows: Sequence[dict[str, Any]], slo_ttft_ms: float) -> float | None:
    """The highest throughput among a sweep's points whose p95 TTFT met the SLO (None: none did)."""
    met = [r["throughput_rps"] for r in rows if (r["ttft_ms"]["p95"] or float("inf")) <= slo_ttft_ms]
    return max(met) if met else None


def knee(rows: Sequence[dict[str, Any]], slo_ttft_ms: float) -> float | None:
    """The highest offered QPS at which a sweep still met the SLO at p95 (the baseline's knee)."""
    met = [r["qps"] for r in rows if (r["ttft_ms"]["p95"] or float("inf")) <= slo_ttft_ms]
    return max(met) if met else None


def p95_at(rows: Sequence[dict[str, Any]], qps: float) -> float | None:
    return next((r["ttft_ms"]["p95"] for r in rows if r["qps"] == qps), None)


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


# The comparisons of issue 37's "done when", and their goals (ratio of the chosen configuration to the other).
BASELINE = ("l0", "roundrobin")
AFFINITY = "prefixaware"
GOALS: dict[str, tuple[str, float]] = {
    "throughput_vs_l0_rr": (">=", 1.5),
    "p95_at_knee_vs_l0_rr": ("<=", 0.5),
    "throughput_vs_affinity": (">=", 1.2),
    "low_load_p95_vs_affinity": ("<=", 1.0),
}


def comparisons(
    rows: Sequence[dict[str, Any]], all_tiers: str, chosen: str, slo_ms: float, router_replicas: int = 2
) -> dict[str, Any]:
    """The chosen routing with every tier against L0-only round robin and against prefix affinity, all with
    `router_replicas` router replicas (the chart's default)."""

    def sweep(tier_set: str, name: str) -> list[dict[str, Any]]:
        same = (tier_set, name, router_replicas)
        picked = (r for r in rows if (r["tiers"], r["routing"], r.get("router_replicas", 2)) == same)
        return sorted(picked, key=lambda r: r["qps"])

    base, best, affine = sweep(*BASELINE), sweep(all_tiers, chosen), sweep(all_tiers, AFFINITY)
    at_slo = {
        name: throughput_at_slo(rows_, slo_ms) for name, rows_ in (("b", base), ("c", best), ("a", affine))
    }
    knee_qps = knee(base, slo_ms)
    lowest = min((r["qps"] for r in rows), default=None)
    found = {
        "throughput_vs_l0_rr": ratio(at_slo["c"], at_slo["b"]),
        "p95_at_knee_vs_l0_rr": ratio(p95_at(best, knee_qps), p95_at(base, knee_qps)) if knee_qps else None,
        "throughput_vs_affinity": ratio(at_slo["c"], at_slo["a"]),
        "low_load_p95_vs_affinity": ratio(p95_at(best, lowest), p95_at(affine, lowest)) if lowest else None,
    }
    return {"chosen": chosen, "baseline_knee_qps": knee_qps, "ratios": found}


def met(name: str, value: float | None) -> bool | None:
    """Whether a comparison met its goal; None when the run's matrix could not measure it."""
    if value is None:
        return None
    direction, goal = GOALS[name]
    return value <= goal if direction == "<=" else value >= goal


def agreement(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """What router replicas that keep their own state cost: per tier set, routing and QPS measured with one
    and with more router replicas, the cache-hit share and p95 TTFT of each."""
    out = []
    keyed = {(r["tiers"], r["routing"], r["qps"], r.get("router_replicas", 2)): r for r in rows}
    for (tiers, name, qps, count), row in sorted(keyed.items()):
        single = keyed.get((tiers, name, qps, 1))
        if count == 1 or single is None:
            continue
        out.append({
            "tiers": tiers, "routing": name, "qps": qps, "router_replicas": count,
            "hit_share": _hits(row), "hit_share_one_router": _hits(single),
            "p95_ms": row["ttft_ms"]["p95"], "p95_ms_one_router": single["ttft_ms"]["p95"],
        })  # fmt: skip
    return out


def _hits(row: dict[str, Any]) -> float:
    share = row["hit_share"]
    return (share["l0"] or 0.0) + (share["l1_l2"] or 0.0)
