"""Benchmark results as people compare them: a table, JSON, CSV and a PNG plot (TTFT vs length)."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.table import Table

from kvtier.bench.methodology import CASES, Sample
from kvtier.bench.stats import Summary, summarize


def summary_rows(samples: Sequence[Sample]) -> list[dict[str, Any]]:
    """One row per (case, target length): TTFT min/median/max and the median speed-up over cold."""
    groups: dict[tuple[str, int], list[Sample]] = {}
    for sample in samples:
        groups.setdefault((sample.case, sample.target), []).append(sample)
    cold = {k[1]: summarize([s.ttft_s for s in v]) for k, v in groups.items() if k[0] == "cold"}
    rows = []
    for (case, tokens), group in sorted(groups.items(), key=lambda kv: (kv[0][1], CASES.index(kv[0][0]))):
        ttft = summarize([s.ttft_s for s in group])
        base = cold.get(tokens)
        hits = [s.tiers.get("l0_hit_tokens") for s in group]
        external = [s.tiers.get("external_hit_tokens") for s in group]
        rows.append(
            {
                "case": case,
                "tokens": tokens,
                "n": ttft.n,
                "ttft_min_ms": ttft.min * 1000,
                "ttft_median_ms": ttft.median * 1000,
                "ttft_max_ms": ttft.max * 1000,
                "speedup": base.median / ttft.median if base else None,
                "l0_hit_tokens": _median_or_none(hits),
                "l1_l2_hit_tokens": _median_or_none(external),
            }
        )
    return rows


def _median_or_none(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return summarize(known).median if known else None


def table(rows: Sequence[dict[str, Any]], title: str, skipped: Sequence[dict[str, str]] = ()) -> Table:
    """The summary rows, then one row per case not measured, with why."""
    out = Table(title=title)
    for name in ("case", "tokens", "n", "TTFT min", "median", "max", "speed-up", "L0 hit", "L1/L2 hit"):
        out.add_column(name, justify="left" if name == "case" else "right")
    for r in rows:
        out.add_row(
            r["case"],
            str(r["tokens"]),
            str(r["n"]),
            f"{r['ttft_min_ms']:.0f} ms",
            f"{r['ttft_median_ms']:.0f} ms",
            f"{r['ttft_max_ms']:.0f} ms",
            "-" if r["speedup"] is None else f"{r['speedup']:.2f}x",
            _tokens(r["l0_hit_tokens"]),
            _tokens(r["l1_l2_hit_tokens"]),
        )
    for case in skipped:
        out.add_row(case["case"], "-", "0", "skipped", "", "", "", "", "")
    if skipped:
        out.caption = "; ".join(f"{c['case']} skipped: {c['reason']}" for c in skipped)
    return out


def _tokens(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


def write_json(path: Path, payload: dict[str, Any]) -> None:
    path.write_text(json.dumps(payload, indent=2, default=_plain) + "\n")


def _plain(value: Any) -> Any:
    if isinstance(value, Summary):
        return asdict(value)
    raise TypeError(f"not serializable: {type(value).__name__}")


def write_csv(path: Path, samples: Sequence[Sample]) -> None:
    tier_keys = sorted({k for s in samples for k in s.tiers})
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["case", "target", "tokens", "repeat", "ttft_s", "total_s", "served_by", *tier_keys])
        for s in samples:
            writer.writerow(
                [
                    s.case,
                    s.target,
                    s.tokens,
                    s.repeat,
                    f"{s.ttft_s:.6f}",
                    f"{s.total_s:.6f}",
                    s.served_by or "",
                ]
                + ["" if s.tiers.get(k) is None else s.tiers[k] for k in tier_keys]
            )


def plot(path: Path, rows: Sequence[dict[str, Any]], title: str) -> None:
    """TTFT (median, min-max bars) against prompt length, one line per case."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    for case in CASES:
        points = [r for r in rows if r["case"] == case]
        if not points:
            continue
        x = [r["tokens"] for r in points]
        y = [r["ttft_median_ms"] for r in points]
        low = [r["ttft_median_ms"] - r["ttft_min_ms"] for r in points]
        high = [r["ttft_max_ms"] - r["ttft_median_ms"] for r in points]
        axes.errorbar(x, y, yerr=[low, high], marker="o", capsize=3, label=case)
    axes.set_xlabel("prompt length (tokens)")
    axes.set_ylabel("TTFT (ms, median; bars min-max)")
    axes.set_title(title)
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def tiers_table(result: dict[str, Any]) -> Table:
    """The tiered rig's steps (kvtier.engine_rig.tiers.measure_tiers): median TTFT, ratio to cold, hits."""
    title = (
        f"L0/L1/L2 on the CPU rig: {result['prompt_tokens']}-token prompt, chunk {result['chunk_size']}, "
        f"{len(result['rounds'])} round(s)"
    )
    out = Table(title=title)
    for name in ("step", "TTFT (median)", "vs cold", "connector hit tokens"):
        out.add_column(name, justify="left" if name == "step" else "right")
    cold = result["table"][0]["ttft_ms"]
    for row in result["table"]:
        out.add_row(
            row["step"], f"{row['ttft_ms']:.0f} ms", f"{row['ttft_ms'] / cold:.2f}x", str(row["hit_tokens"])
        )
    return out


def tiers_summary(result: dict[str, Any]) -> str:
    """The tiered rig's result in one line: the L2-hit to cold ratio and whether greedy outputs matched."""
    return (
        f"L2 hit / cold TTFT = {result['l2_vs_cold']:.2f}x; "
        f"greedy outputs identical: {result['identical_outputs']}"
    )


def plot_tiers(path: Path, result: dict[str, Any]) -> None:
    """One bar per step of the tiered rig (median TTFT, min-max over the rounds), labelled with hit tokens."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    steps = [row["step"] for row in result["table"]]
    rounds = result["rounds"]
    medians = [row["ttft_ms"] for row in result["table"]]
    low = [m - min(r[i]["ttft_ms"] for r in rounds) for i, m in enumerate(medians)]
    high = [max(r[i]["ttft_ms"] for r in rounds) - m for i, m in enumerate(medians)]
    figure, axes = plt.subplots(figsize=(8, 4.5))
    bars = axes.barh(steps, medians, xerr=[low, high], capsize=3, color="#4c72b0")
    for bar, row in zip(bars, result["table"], strict=True):
        axes.annotate(
            f" {row['hit_tokens']} hit tokens",
            (bar.get_width(), bar.get_y() + bar.get_height() / 2),
            va="center",
            fontsize=8,
        )
    axes.invert_yaxis()  # steps top to bottom in the order they ran
    axes.set_xlabel("TTFT (ms, median; bars min-max over rounds)")
    axes.set_title(f"L0/L1/L2 on the CPU rig ({result['prompt_tokens']} tokens)")
    axes.grid(True, axis="x", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
