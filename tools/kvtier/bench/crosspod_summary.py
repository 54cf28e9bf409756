"""Cross-pod TTFT trials summed up per L2 backend, and one backend against another.

A trial (kvtier.bench.crosspod_probe) is one fresh prompt sent to replica A and then to replica B (B's
`hit_ttft_s`, `hit_tokens`: what its KV connector loaded through the shared L2), and a second fresh prompt
nobody stored sent to B alone (`cold_ttft_s`). A trial whose B loaded nothing is invalid: its TTFT measures
no cross-pod hit, so it is counted and left out of the hit figures.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any


def nearest_rank(values: Sequence[float], quantile: float) -> float:
    """The nearest-rank quantile: the smallest value with at least `quantile` of the values at or below it
    (with ten samples, p95 is the largest)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(quantile * len(ordered)) - 1)]


def _spread(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median_s": statistics.median(values), "p95_s": nearest_rank(values, 0.95), "n": len(values)}


def backend(trials: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Median and p95 of B's hit TTFT (valid trials only) and cold TTFT (every trial), the hit tokens, how
    many trials had no hit, the hit-vs-cold speed-up (cold median / hit median) and the median load average
    the trials started at (None where the trials did not record it)."""
    valid = [t for t in trials if (t.get("hit_tokens") or 0) > 0]
    loads = [t["load1"] for t in trials if t.get("load1") is not None]
    hit = _spread([t["hit_ttft_s"] for t in valid])
    cold = _spread([t["cold_ttft_s"] for t in trials])
    return {
        "trials": len(trials),
        "invalid": len(trials) - len(valid),
        "hit": hit,
        "cold": cold,
        "hit_tokens_median": statistics.median([t["hit_tokens"] for t in valid]) if valid else 0,
        "prompt_tokens_median": statistics.median([t["tokens"] for t in trials]) if trials else 0,
        "speedup": cold["median_s"] / hit["median_s"] if hit and cold else None,
        "load1_median": statistics.median(loads) if loads else None,
    }


def ratio(candidate: Mapping[str, Any], baseline: Mapping[str, Any], case: str = "hit") -> float | None:
    """candidate / baseline median TTFT for `case` (hit or cold); None where either has no samples."""
    if not candidate.get(case) or not baseline.get(case):
        return None
    return float(candidate[case]["median_s"] / baseline[case]["median_s"])


def paired_ratio(
    candidate: Sequence[Mapping[str, Any]], baseline: Sequence[Mapping[str, Any]]
) -> float | None:
    """The median over trial numbers of candidate / baseline hit TTFT, where both trials of a number hit:
    with the backends interleaved trial by trial, each pair ran at nearly the same moment and prompt length,
    so a noisy stretch of the machine cancels out of each ratio. None without such a pair."""

    def hits(trials: Sequence[Mapping[str, Any]]) -> dict[int, float]:
        return {
            t["number"]: t["hit_ttft_s"] for t in trials if "number" in t and (t.get("hit_tokens") or 0) > 0
        }

    ours, theirs = hits(candidate), hits(baseline)
    pairs = [ours[n] / theirs[n] for n in sorted(ours.keys() & theirs.keys()) if theirs[n] > 0]
    return statistics.median(pairs) if pairs else None
