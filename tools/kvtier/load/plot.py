"""The load curves as a PNG: p95 TTFT and throughput against offered QPS, one line per tier set x routing."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # after the backend is chosen


def curves(rows: Sequence[dict[str, Any]], slo_ttft_ms: float, out: Path) -> Path:
    figure, (ttft, throughput) = plt.subplots(1, 2, figsize=(13, 5))
    for key in sorted({(r["tiers"], r["routing"]) for r in rows}):
        sweep = sorted((r for r in rows if (r["tiers"], r["routing"]) == key), key=lambda r: r["qps"])
        label = f"{key[0]}, {key[1]}"
        qps = [r["qps"] for r in sweep]
        ttft.plot(qps, [r["ttft_ms"]["p95"] for r in sweep], marker="o", label=label)
        throughput.plot(qps, [r["throughput_rps"] for r in sweep], marker="o", label=label)
    ttft.axhline(slo_ttft_ms, color="grey", linestyle="--", label="SLO")
    ttft.set(xlabel="offered QPS", ylabel="p95 TTFT (ms)", yscale="log", title="p95 TTFT")
    throughput.set(xlabel="offered QPS", ylabel="completed requests / s", title="throughput")
    ttft.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    plt.close(figure)
    return out
