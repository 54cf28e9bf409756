"""benchmarks/curvine_block_report_bench.py's own logic, without Curvine: what it reads from the master's
histogram and the worker's log, and the one-master cut of the readpath bench's config."""

from __future__ import annotations

from typing import Any

import pytest

from harness import benchmark_scripts

# Curvine v0.4.1 master /metrics: operation_duration, label `operation`, buckets in us (master_metrics.rs).
METRICS = """\
operation_duration_bucket{operation="WorkerBlockReport",le="10000"} 2
operation_duration_bucket{operation="WorkerBlockReport",le="50000"} 5
operation_duration_bucket{operation="WorkerBlockReport",le="100000"} 5
operation_duration_bucket{operation="WorkerBlockReport",le="+Inf"} 5
operation_duration_sum{operation="WorkerBlockReport"} 90000
operation_duration_count{operation="WorkerBlockReport"} 5
operation_duration_bucket{operation="CreateFile",le="+Inf"} 7
operation_duration_count{operation="CreateFile"} 7
"""


@pytest.fixture(scope="module")
def bench() -> Any:
    return benchmark_scripts.load("curvine_block_report_bench")


def test_histogram_only_the_block_report(bench: Any) -> None:
    got = bench.report_histogram(METRICS)
    assert got["count"] == 5 and got["sum"] == 90000
    assert got["le 50000"] == 5 and got["le +Inf"] == 5


def test_slowest_bound_is_the_first_bucket_holding_every_new_call(bench: Any) -> None:
    before = {"count": 1.0, "le 10000": 1.0, "le 50000": 1.0, "le 100000": 1.0}
    assert bench.slowest_bound_s(before, bench.report_histogram(METRICS)) == 0.05
    over = bench.report_histogram(METRICS) | {"le 50000": 4.0, "le 100000": 4.0}
    assert bench.slowest_bound_s(before, over) is None  # one call past 100 ms
    assert bench.slowest_bound_s(before, {"count": 1.0}) is None  # no call


def test_report_line(bench: Any) -> None:
    line = "INFO block_actor.rs:98 worker block report success, total blocks 2000, used 11 ms"
    found = bench.REPORT_LINE.search(line)
    assert found and found.groups() == ("2000", "11")


def test_single_node_keeps_the_first_master(bench: Any) -> None:
    conf = {
        "journal": {"journal_addrs": [{"id": i} for i in (1, 2, 3)]},
        "client": {"master_addrs": [{"hostname": h} for h in ("a", "b", "c")]},
    }
    got = bench.single_node(conf)
    assert got["journal"]["journal_addrs"] == [{"id": 1}]
    assert got["client"]["master_addrs"] == [{"hostname": "a"}]
