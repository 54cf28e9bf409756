"""Load points summarized (kvtier.load.summary) and the bench's comparisons, on hand-made points.

Percentiles are checked against the standard library's inclusive quantiles (the same linear
interpolation, computed independently of numpy)."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtier.load import driver, summary


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 100, allow_nan=False), min_size=2, max_size=300))
def test_percentiles_are_the_inclusive_linear_ones(values: list[float]) -> None:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    found = summary.percentiles(values)
    for p in driver.PERCENTILES:
        assert found[f"p{p}"] == pytest.approx(cuts[p - 1] * 1000, rel=1e-9, abs=1e-9)


def _record(ttft: float, ok: bool = True, router: int = 0, tokens: int = 1000) -> dict:
    return {"ok": ok, "ttft_s": ttft, "itl_s": [0.01, 0.02], "input_length": tokens, "output_tokens": 16,
            "router": router}  # fmt: skip


def test_a_point_counts_goodput_by_ttft_and_leaves_failures_out_of_every_rate() -> None:
    records = [_record(0.2), _record(0.9, router=1), _record(1.5), _record(0.1, ok=False)]
    point = driver.Point(
        4.0, records, 2.0, {"l0_hit_tokens": 1500.0, "external_hit_tokens": 600.0}, [2.0, 1.0]
    )
    row = summary.summarize(point, slo_ttft_ms=1000)
    assert (row["completed"], row["failed"]) == (3, 1)
    assert row["throughput_rps"] == pytest.approx(1.5)
    assert row["goodput_rps"] == pytest.approx(1.0)  # 0.2 s and 0.9 s met the SLO; the failure never counts
    assert row["output_tokens_per_s"] == pytest.approx(24.0)
    assert row["hit_share"] == {"l0": pytest.approx(0.5), "l1_l2": pytest.approx(0.2)}
    assert row["by_router"] == {"0": 2, "1": 1}
    assert row["by_engine"] == [2.0, 1.0]


def test_an_engine_without_a_counter_says_so_instead_of_zero() -> None:
    row = summary.summarize(driver.Point(1.0, [_record(0.3)], 1.0, {}, [1.0]), 1000)
    assert row["hit_share"] == {"l0": None, "l1_l2": None}


def _row(tiers: str, routing: str, qps: float, throughput: float, p95: float) -> dict:
    return {
        "tiers": tiers,
        "routing": routing,
        "qps": qps,
        "throughput_rps": throughput,
        "ttft_ms": {"p95": p95},
    }


ROWS = [
    _row("l0", "roundrobin", 2, 2.0, 400), _row("l0", "roundrobin", 4, 3.0, 900),
    _row("l0", "roundrobin", 6, 3.2, 4000),
    _row("l0+l1+l2", "leastloaded", 2, 2.0, 150), _row("l0+l1+l2", "leastloaded", 4, 4.0, 300),
    _row("l0+l1+l2", "leastloaded", 6, 5.5, 800),
    _row("l0+l1+l2", "prefixaware", 2, 2.0, 120), _row("l0+l1+l2", "prefixaware", 4, 3.9, 700),
    _row("l0+l1+l2", "prefixaware", 6, 4.0, 2500),
]  # fmt: skip


def test_the_comparisons_take_throughput_at_the_slo_and_p95_at_the_baselines_knee() -> None:
    result = summary.comparisons(ROWS, "l0+l1+l2", "leastloaded", slo_ms=1000)
    assert result["baseline_knee_qps"] == 4
    ratios = result["ratios"]
    assert ratios["throughput_vs_l0_rr"] == pytest.approx(5.5 / 3.0)
    assert ratios["p95_at_knee_vs_l0_rr"] == pytest.approx(300 / 900)
    assert ratios["throughput_vs_affinity"] == pytest.approx(5.5 / 3.9)
    assert ratios["low_load_p95_vs_affinity"] == pytest.approx(150 / 120)
    assert [summary.met(name, value) for name, value in ratios.items()] == [True, True, True, False]


def test_a_comparison_the_matrix_cannot_make_is_not_measured_rather_than_failed() -> None:
    result = summary.comparisons([r for r in ROWS if r["tiers"] != "l0"], "l0+l1+l2", "leastloaded", 1000)
    assert result["baseline_knee_qps"] is None
    assert (
        result["ratios"]["throughput_vs_l0_rr"] is None and result["ratios"]["p95_at_knee_vs_l0_rr"] is None
    )
    assert summary.met("throughput_vs_l0_rr", None) is None
    nothing_met = [_row("l0", "roundrobin", 2, 1.0, 5000)]
    assert summary.throughput_at_slo(nothing_met, 1000) is None and summary.knee(nothing_met, 1000) is None


def test_agreement_pairs_each_point_with_its_one_router_twin_and_nothing_else() -> None:
    def measured(routers: int, l0: float, p95: float, qps: float = 4) -> dict:
        return {**_row("l0+l1+l2", "prefixaware", qps, 3.0, p95), "router_replicas": routers,
                "hit_share": {"l0": l0, "l1_l2": 0.1}}  # fmt: skip

    rows = [measured(1, 0.6, 200), measured(2, 0.4, 350), measured(2, 0.5, 300, qps=6)]
    (pair,) = summary.agreement(rows)
    assert (pair["qps"], pair["router_replicas"]) == (4, 2)
    assert pair["hit_share"] == pytest.approx(0.5) and pair["hit_share_one_router"] == pytest.approx(0.7)
    assert (pair["p95_ms"], pair["p95_ms_one_router"]) == (350, 200)
