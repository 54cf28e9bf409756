"""`kvtier plan --scale`: the shared L2's saturation QPS, the workers to size and the chunk trade-off.

The oracle is arithmetic done here by hand on round numbers, and relations the model must keep whatever
its inputs (more workers carry proportionally more; the workers it asks for carry the load it was asked
for); the mix is read from what `kvtier load`'s own summary writes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvtier.cli import main
from kvtier.load import driver, summary
from kvtier.plan import capacity, scale
from kvtier.plan.facts import GIB

MIB = 2**20
TIMING = capacity.Timing(request_ms=0.0, hit_ms=0.0, prefill_tps=1000.0)


def hardware(disk: float = 1.0, nic_gbps: float = 80.0) -> scale.Hardware:
    return scale.Hardware(disk, nic_gbps, assumed=False)


def test_saturation_qps_by_hand() -> None:
    # 1,000-token prompts, 1 MiB a token: 500 tokens read from L2 (500 MiB), 250 computed and written.
    mix = scale.Mix(1000, l0_share=0.25, connector_share=0.5, source="hand")
    demand = scale.Demand.of(mix, MIB, TIMING, replica_qps=None)
    assert demand.read_bytes == 500 * MIB and demand.write_bytes == 250 * MIB
    assert demand.replica_qps == pytest.approx(4.0)  # 1,000 tokens/s over 250 computed tokens
    # Disk 1 GiB/s at 70 %: 716.8 MiB/s over 750 MiB a request. NIC 80 Gbit/s = 9.31 GiB/s: not the bound.
    assert demand.l2_saturation_qps(1, hardware()) == pytest.approx(0.7 * 1024 / 750)
    # A 4 Gbit/s NIC (0.4657 GiB/s) is: 0.7 x 4e9/8 B/s over 500 MiB of reads.
    assert demand.l2_saturation_qps(1, hardware(nic_gbps=4)) == pytest.approx(0.7 * 0.5e9 / (500 * MIB))


def test_rows_name_the_first_to_saturate_and_the_workers_to_add() -> None:
    mix = scale.Mix(1000, 0.25, 0.5, "hand")
    demand = scale.Demand.of(mix, MIB, TIMING, replica_qps=None)
    table = {(r["replicas"], r["workers"]): r for r in scale.rows(demand, hardware(), [1, 8], [1, 4, 5])}
    # One replica asks 4 QPS x 750 MiB = 2.93 GiB/s: a 0.7 GiB/s worker saturates at 0.96 QPS.
    assert table[1, 1]["bottleneck"] == "L2" and table[1, 1]["workers_needed"] == 5  # 2.93 / 0.7 = 4.19
    assert table[1, 4]["bottleneck"] == "L2"  # 4 workers carry 3.82 QPS, 5 carry 4.78
    assert table[1, 4]["l2_saturation_qps"] == pytest.approx(4 * 0.7 * 1024 / 750)
    assert table[1, 5]["bottleneck"] == "replicas" and table[1, 5]["replicas_qps"] == pytest.approx(4.0)
    assert table[8, 4]["bottleneck"] == "L2" and table[8, 4]["workers_needed"] == 34  # 8 x 4.19 = 33.5
    # Traffic is counted at the lower of the two ceilings.
    assert table[8, 4]["l2_read_gib_s"] == pytest.approx(table[8, 4]["l2_saturation_qps"] * 500 / 1024)


@given(
    prompt=st.floats(100, 100_000),
    l0=st.floats(0, 0.5),
    connector=st.floats(0, 0.5),
    bpt=st.integers(1_000, 1_000_000),
    disk=st.floats(0.1, 20),
    nic=st.floats(1, 400),
    qps=st.floats(0.01, 1000),
)
def test_workers_asked_for_carry_the_load(
    prompt: float, l0: float, connector: float, bpt: int, disk: float, nic: float, qps: float
) -> None:
    demand = scale.Demand.of(scale.Mix(prompt, l0, connector, "drawn"), bpt, TIMING, replica_qps=qps)
    hw = hardware(disk, nic)
    one = demand.l2_saturation_qps(1, hw)
    assert demand.l2_saturation_qps(7, hw) == pytest.approx(7 * one)
    needed = demand.workers_for(qps, hw)
    assert needed is not None and demand.l2_saturation_qps(needed, hw) >= qps * (1 - 1e-9)
    assert needed == 1 or demand.l2_saturation_qps(needed - 1, hw) < qps


def test_worst_case_reads_every_reused_token_from_l2() -> None:
    mix = scale.Mix(1632, 0.532, 0.230, "measured")
    worst = mix.worst_case()
    assert worst.l0_share == 0 and worst.connector_share == pytest.approx(0.762)
    assert worst.computed_share == pytest.approx(mix.computed_share)


def test_chunk_rows_trade_files_for_reuse() -> None:
    model = capacity.known_model("qwen2-7b")
    assert model is not None
    d = capacity.Deployment(model, 2, 2)
    rows = scale.chunk_rows(d, scale.Mix(1024, 0.5, 0.25, "hand"), fleet_qps=10)
    by_chunk = {r["chunk_tokens"]: r for r in rows}
    # LMCache's header (tests/engine measured it) and the integrity trailer (cache.l2.integrity, the default)
    assert by_chunk[256]["file_bytes"] == 256 * 57_344 + 28 + 24
    # 256 tokens read (25 %) and 256 computed and written (the 25 % neither L0 nor L2 held): two files.
    assert by_chunk[256]["files_per_request"] == pytest.approx(2.0)
    assert by_chunk[256]["file_ops_per_s"] == pytest.approx(20.0)
    assert by_chunk[512]["reuse_lost_share"] == pytest.approx(0.25)  # half a chunk of a 1,024-token prompt
    native = capacity.Deployment(model, 2, 2, backend="vllm-native")
    assert scale.chunk_rows(native, scale.Mix(1024, 0.5, 0.25, "hand"), 10)[0]["file_bytes"] % 4096 == 0


def _load_json(tmp_path: Path) -> Path:
    """A load.json as `kvtier load` writes it: rows from its own summary of two points."""
    records = [
        {"ok": True, "input_length": 1000, "output_tokens": 4, "ttft_s": 0.1, "itl_s": [0.01], "router": 0}
    ] * 10
    points = [
        driver.Point(2.0, records, 5.0, {"l0_hit_tokens": 5000, "external_hit_tokens": 2500}, [10]),
        driver.Point(3.0, records, 4.0, {"l0_hit_tokens": 3000, "external_hit_tokens": 4500}, [10]),
    ]
    path = tmp_path / "load.json"
    path.write_text(json.dumps({"rows": [summary.summarize(p, 1000) for p in points]}))
    return path


def test_mix_from_a_load_run(tmp_path: Path) -> None:
    mix = scale.mix_from_load(_load_json(tmp_path))
    assert mix.prompt_tokens == 1000
    assert mix.l0_share == pytest.approx(0.4) and mix.connector_share == pytest.approx(0.35)


def test_cli_prints_the_scale_table_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--model", "qwen2-7b", "--scale", "--replicas", "8,64", "--curvine-workers", "2"]
    assert main([*argv, "--load", str(_load_json(tmp_path)), "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)["models"][0]["scale"]
    assert out["hardware"]["assumed"] is True
    measured = out["cases"]["measured"]
    assert [(r["replicas"], r["workers"]) for r in measured["rows"]] == [(8, 2), (64, 2)]
    assert measured["mix"]["connector_share"] == pytest.approx(0.35)
    # 57,344 B a token x 350 tokens read from L2.
    assert measured["read_mib_per_request"] == pytest.approx(350 * 57_344 / MIB)
    assert all(math.isfinite(r["l2_saturation_qps"]) for r in measured["rows"])
    assert out["break_even_stream_gib_s"] == pytest.approx(
        57_344 * capacity.reference_timing().prefill_tps / GIB
    )


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--replicas", "8"], "--replicas only applies to the scale table: add --scale"),
        (["--scale", "--nic-gbps", "nan"], "--nic-gbps must be a positive number, got nan"),
        (["--scale", "--load", "/nonexistent/load.json"], "--load /nonexistent/load.json: cannot read it"),
    ],
)
def test_cli_refusals(extra: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--model", "qwen2-7b", *extra]) == 2
    assert said in capsys.readouterr().err


def test_a_file_that_is_not_a_load_run_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "values.yaml"
    path.write_text("models: []\n")
    assert main(["plan", "--model", "qwen2-7b", "--scale", "--load", str(path)]) == 2
    assert "not a load.json of `kvtier load`" in capsys.readouterr().err
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps({"rows": [{"prompt_tokens": 10, "completed": 1, "l0_hit_tokens": 9,
                                            "connector_hit_tokens": 9}]}))  # fmt: skip
    assert main(["plan", "--model", "qwen2-7b", "--scale", "--load", str(edited)]) == 2
    assert "are not within its 10 prompt tokens" in capsys.readouterr().err
