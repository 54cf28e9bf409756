"""benchmarks/curvine_readpath_bench.py's own logic, without Curvine: every setting it sweeps is one the chart
renders, the per-process configs it writes stay Curvine v0.4.1 configs (only addresses, ports and paths
changed), and the choice of a setting follows its rule."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from harness import benchmark_scripts
from kvtier.upstream import curvine_config


@pytest.fixture(scope="module")
def bench() -> Any:
    return benchmark_scripts.load("curvine_readpath_bench")


@pytest.fixture(scope="module")
def chart(bench: Any) -> dict[str, Any]:
    if not bench.HELM.exists():
        pytest.skip("pinned Helm not built (make tools)")
    return bench.render(bench.QUICK[1])


def test_every_swept_setting_renders_within_the_workers_cap(bench: Any) -> None:
    if not bench.HELM.exists():
        pytest.skip("pinned Helm not built (make tools)")
    for setting in {s.name: s for s in bench.SWEEP + bench.QUICK}.values():
        client = bench.render(setting)["client"]
        chunk = curvine_config.size_bytes(client["read_chunk_size"])
        assert chunk and (client["read_chunk_num"] <= 1 or chunk * client["read_chunk_num"] <= 16 << 20)
        assert str(client["read_parallel"]) == setting.values["config.read.parallel"]


@pytest.mark.parametrize("role", ["m1", "m2", "m3", "wa", "wb", "client"])
def test_each_process_config_is_still_a_curvine_config(bench: Any, chart: dict[str, Any], role: str) -> None:
    conf = bench.local_config(chart, Path("/var/tmp/x"), role)
    parsed = tomllib.loads(bench.toml_text(conf))
    assert parsed == conf
    assert curvine_config.check(parsed) == []
    assert parsed["client"] == {**chart["client"], "master_addrs": parsed["client"]["master_addrs"]}
    assert [a["hostname"] for a in parsed["journal"]["journal_addrs"]] == list(bench.MASTERS)
    assert parsed["fuse"] == chart["fuse"]


def _result(cross: float, same: float) -> dict[str, Any]:
    keys = ("fuse A direct", "fuse A buffered", "fuse B direct", "fuse B buffered")
    return {"ratios": {k: (cross if " B " in k else same) for k in keys}}


def test_the_choice_is_the_best_cross_node_ratio_that_keeps_the_same_node_read(bench: Any) -> None:
    results = {
        "upstream": _result(4.0, 2.0),
        "fast but worse on one node": _result(1.5, 2.5),
        "better both": _result(1.8, 1.3),
        "slower": _result(2.5, 1.2),
    }
    assert bench.choose(results, "upstream") == "better both"
    assert bench.verdict(results["better both"]) == (1.8, 1.3)
