"""Summaries of repeated measurements."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    n: int
    min: float
    median: float
    max: float


def summarize(values: Sequence[float]) -> Summary:
    if not values:
        raise ValueError("no values to summarize")
    return Summary(len(values), min(values), statistics.median(values), max(values))
