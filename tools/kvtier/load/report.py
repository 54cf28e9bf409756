"""Load results as people compare them: one table row per point, and the goals' verdicts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table

from kvtier.load import summary

COLUMNS = ("tiers", "routing", "routers", "QPS", "ok", "req/s", "goodput", "TTFT p50", "p95", "p99",
           "ITL p95", "L0 hits", "L1+L2 hits", "per engine")  # fmt: skip


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def cells(row: dict[str, Any]) -> list[str]:
    ttft, share = row["ttft_ms"], row["hit_share"]
    return [
        row["tiers"], row["routing"], str(row.get("router_replicas", "-")), f"{row['qps']:g}",
        f"{row['completed']}/{row['requests']}",
        f"{row['throughput_rps']:.2f}", f"{row['goodput_rps']:.2f}", ms(ttft["p50"]), ms(ttft["p95"]),
        ms(ttft["p99"]), ms(row["itl_ms"]["p95"]), pct(share["l0"]), pct(share["l1_l2"]),
        "/".join(f"{n:.0f}" for n in row["by_engine"]),
    ]  # fmt: skip


def table(rows: Sequence[dict[str, Any]], title: str) -> Table:
    shown = Table(title=title)
    for column in COLUMNS:
        shown.add_column(column, justify="left" if column in ("tiers", "routing") else "right")
    for row in rows:
        shown.add_row(*cells(row))
    return shown


def line(row: dict[str, Any]) -> str:
    """One point as a log line, printed as the sweep goes."""
    return " | ".join(f"{name} {value}" for name, value in zip(COLUMNS, cells(row), strict=True))


def verdicts(result: dict[str, Any]) -> list[tuple[str, bool | None]]:
    """("name: 1.23x (goal >= 1.5x): MET", met) per comparison of summary.comparisons."""
    out = []
    for name, value in result["ratios"].items():
        direction, goal = summary.GOALS[name]
        shown = "not measured (not in this run's matrix, or no point met the SLO)"
        if value is not None:
            shown = f"{value:.2f}x"
        met = summary.met(name, value)
        state = {True: "MET", False: "NOT MET", None: "not measured"}[met]
        out.append((f"{name}: {shown} (goal {direction} {goal}x): {state}", met))
    return out
