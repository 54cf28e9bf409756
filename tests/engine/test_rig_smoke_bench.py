"""`kvtier smoke` and `kvtier bench` against the real engines and the real router."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvtier import cli
from kvtier.bench import methodology, prompts
from kvtier.bench import run as bench_run
from kvtier.engine_rig import rig as engine_rig
from kvtier.podscripts import kvcheck


def test_smoke_passes_on_the_rig(engines: engine_rig.EngineRig, capsys: pytest.CaptureFixture[str]) -> None:
    with engines.router("prefixaware") as router:
        argv = ["smoke", "--router-url", router, "--output", "json"]
        argv += [arg for url in engines.urls for arg in ("--replica-url", url)]
        code = cli.main(argv)
    outcomes = {o["id"]: o for o in json.loads(capsys.readouterr().out)}
    assert code == 0, outcomes
    assert outcomes["router"]["status"] == "PASS"
    assert outcomes["router"]["models"] == [engine_rig.MODEL_NAME]
    assert outcomes["completion"]["status"] == "PASS" and outcomes["completion"]["tokens"] > 0
    # This routing rig runs L0 only (engine_rig.CPU_TIERS_NOTE): the L2 checks say so instead of passing;
    # the cross-pod check passes on the tiered rig (test_l2_tiers.py).
    assert outcomes["crosspod"]["status"] == "SKIP" and "L2 is off" in outcomes["crosspod"]["summary"]


def test_crosspod_without_l2_fails_with_a_reason(engines: engine_rig.EngineRig) -> None:
    """Forced on a rig without L2, the cross-pod check must fail: B recomputes A's prompt."""
    a, b = engines.urls
    outcome = kvcheck.check_crosspod(a, b, engine_rig.MODEL_NAME, words=600, settle_s=0)
    assert outcome["ok"] is False
    assert outcome["b"]["external_hit_tokens"] == 0  # vLLM counts connector hits: none here
    assert "no KV connector hit tokens" in outcome["summary"]


def test_bench_measures_cold_and_warm_ttft(engines: engine_rig.EngineRig, tmp_path: Path) -> None:
    replicas = methodology.replicas_for(engines.urls)
    plan = bench_run.BenchPlan(
        replicas, None, None, lengths=(300, 2000), repeats=2, turns=2, concurrency=2, out=tmp_path
    )
    from rich.console import Console

    results = bench_run.execute(plan, Console(quiet=True))
    rows = {(r["case"], r["tokens"]): r for r in results["summary"]}
    cold, same, other = rows[("cold", 2000)], rows[("warm-same", 2000)], rows[("warm-other", 2000)]
    # L0 hits on the same replica: most of the prompt comes from the prefix cache. How much faster that
    # is belongs to the benchmarks (`kvtier bench --rig`, benchmarks/tiers_bench.py): at a load average
    # of 44 a warm median came out above the cold one (CI, 2026-12-07), so this test holds the bench to
    # what it measured, not to a speed-up.
    assert same["l0_hit_tokens"] >= 1500
    for row in (cold, same, other):
        assert row["n"] == 2 and 0 < row["ttft_min_ms"] <= row["ttft_median_ms"], rows
    # Another replica has no copy (no L2 here): a full miss.
    assert other["l0_hit_tokens"] == 0
    assert results["multi_turn"]["cached"]["total_s"] > 0
    assert len(results["concurrency"]["cold"]) == len(results["concurrency"]["warm"]) == 2
    assert all(s["served_by"] for s in results["samples"])
    assert (tmp_path / "ttft.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len((tmp_path / "bench.csv").read_text().splitlines()) == 1 + 2 * 2 * 3


def test_generated_tokenizer_gives_about_one_token_per_word(engines: engine_rig.EngineRig) -> None:
    """The rig's prompt vocabulary is in the tokenizer's training text, so lengths in words ~ tokens."""
    count = prompts.tokenize_counter(engines.urls[0], engine_rig.MODEL_NAME)
    tokens = count(kvcheck.long_prompt(1000))
    assert 1000 <= tokens <= 1050, tokens
