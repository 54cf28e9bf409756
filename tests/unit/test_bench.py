"""`kvtier bench` logic against stand-in replicas on 127.0.0.1: the methodology's order and attribution,
the summaries, the output files, and clear errors from bad endpoints (real engines: tests/engine/)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from test_kvcheck_fakes import FakeReplica, Reply, as_json, as_text, closed_port_url, serve

from kvtier import cli
from kvtier.bench import methodology, prompts, report, routing
from kvtier.bench import run as bench_run
from kvtier.bench.stats import summarize


class FakeRouter:
    """Stand-in router: sticky (same prompt, same replica) or strictly alternating."""

    def __init__(self, replicas: list[FakeReplica], sticky: bool) -> None:
        self.replicas, self.sticky, self.sent = replicas, sticky, 0
        self.homes: dict[str, int] = {}

    def complete(self, request: dict[str, Any]) -> Reply:
        if self.sticky:
            index = self.homes.setdefault(request["prompt"], len(self.homes) % 2)
        else:
            index = self.sent % 2
        self.sent += 1
        return self.replicas[index].complete(request)


def test_summarize() -> None:
    s = summarize([3.0, 1.0, 2.0, 10.0])
    assert (s.n, s.min, s.median, s.max) == (4, 1.0, 2.5, 10.0)
    with pytest.raises(ValueError):
        summarize([])


def test_sized_prompt_converges_on_the_tokenizer() -> None:
    prompt, tokens, exact = prompts.sized_prompt(300, lambda p: 2 * len(p.split()), nonce="n")
    assert exact and abs(tokens - 300) <= 3 and prompt.startswith("Session n.")
    _, estimate, exact = prompts.sized_prompt(300, None)
    assert (estimate, exact) == (300, False)


def test_sweep_sends_cold_warm_same_warm_other_and_attributes_them() -> None:
    a, b = FakeReplica(), FakeReplica()
    steps: list[str] = []
    with serve(a.routes()) as sa, serve(b.routes()) as sb:
        replicas = methodology.replicas_for([sa.url, sb.url])
        samples = methodology.ttft_sweep(replicas, "tiny", [40, 80], 2, None, steps.append)
    assert [s.case for s in samples[:3]] == ["cold", "warm-same", "warm-other"]
    assert [s.served_by for s in samples[:3]] == ["replica-0", "replica-0", "replica-1"]
    assert samples[0].tiers["l0_hit_tokens"] == 0 and samples[1].tiers["l0_hit_tokens"] == 40
    assert samples[2].tiers["l0_hit_tokens"] == 0  # B never saw the prompt
    assert len(samples) == len(steps) == 2 * 2 * 3
    assert (a.requests, b.requests) == (8, 4)


def test_summary_rows_and_speedup() -> None:
    samples = [
        methodology.Sample("cold", 500, 501, r, t, 0.0, "replica-0") for r, t in enumerate([0.4, 0.6])
    ] + [
        methodology.Sample("warm-same", 500, 501, r, t, 0.0, "replica-0", {"l0_hit_tokens": 496.0})
        for r, t in enumerate([0.1, 0.1])
    ]
    rows = {r["case"]: r for r in report.summary_rows(samples)}
    assert rows["cold"]["ttft_median_ms"] == pytest.approx(500.0)
    assert rows["warm-same"]["speedup"] == pytest.approx(5.0)
    assert rows["warm-same"]["l0_hit_tokens"] == 496.0 and rows["cold"]["l0_hit_tokens"] is None


def test_routing_trials_tell_sticky_from_round_robin() -> None:
    results = {}
    for sticky in (True, False):
        a, b = FakeReplica(), FakeReplica()
        router = FakeRouter([a, b], sticky)
        with (
            serve(a.routes()) as sa,
            serve(b.routes()) as sb,
            serve({("POST", "/v1/completions"): router.complete}) as sr,
        ):
            replicas = methodology.replicas_for([sa.url, sb.url])
            results[sticky] = routing.routing_trials(
                sr.url, "x", replicas, "tiny", 4, 30, None, lambda _s: None
            )
    assert results[True].warm_ratio == 1.0 and results[False].warm_ratio == 0.0
    assert all(t.repeat_l0_hit_tokens == 30 for t in results[True].trials)
    assert results[True].as_dict()["trials"][0]["first"] == results[True].trials[0].repeat


def test_execute_writes_json_csv_png(tmp_path: Path) -> None:
    a, b = FakeReplica(), FakeReplica()
    models = {("GET", "/v1/models"): as_json({"data": [{"id": "tiny"}]})}
    with serve({**a.routes(), **models}) as sa, serve(b.routes()) as sb:
        plan = bench_run.BenchPlan(
            methodology.replicas_for([sa.url, sb.url]),
            None,
            None,
            [20, 40],
            1,
            turns=2,
            concurrency=2,
            out=tmp_path,
        )
        results = bench_run.execute(plan, Console(quiet=True))
    assert results["model"] == "tiny" and results["skipped"] == []
    assert set(results["multi_turn"]) == {"cached", "uncached", "speedup"}
    assert len(results["multi_turn"]["cached"]["ttft_s"]) == 2
    assert len(results["concurrency"]["warm"]) == 2
    saved = json.loads((tmp_path / "bench.json").read_text())
    assert len(saved["samples"]) == 6 and saved["summary"]
    rows = list(csv.DictReader((tmp_path / "bench.csv").open()))
    assert [r["case"] for r in rows[:3]] == ["cold", "warm-same", "warm-other"]
    assert (tmp_path / "ttft.png").read_bytes()[:4] == b"\x89PNG"
    table = report.table(results["summary"], "t")
    assert table.row_count == 6


@pytest.mark.parametrize("output", ["json", "table"])
def test_one_replica_reports_the_other_replica_case_as_skipped(
    output: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Smoke refuses one replica; bench still measures cold and warm-same, and says what it could not."""
    replica = FakeReplica()
    models = {("GET", "/v1/models"): as_json({"data": [{"id": "tiny"}]})}
    argv = ["bench", "--lengths", "20", "--repeats", "1", "--turns", "0", "--out", str(tmp_path)]
    with serve({**replica.routes(), **models}) as s:
        code = cli.main([*argv, "--replica-url", s.url, "--output", output])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "warm-other skipped: one replica reached" in captured.err
    saved = json.loads((tmp_path / "bench.json").read_text())
    assert saved["skipped"] == [{"case": "warm-other", "reason": bench_run.ONE_REPLICA}]
    assert [r["case"] for r in saved["summary"]] == ["cold", "warm-same"]
    if output == "json":
        assert json.loads(captured.out)["skipped"] == saved["skipped"]
    else:
        row = next(line for line in captured.out.splitlines() if "warm-other" in line)
        assert "skipped" in row and "give --replica-url twice" in " ".join(captured.out.split())


# --- clear errors from bad endpoints (CLI exit 2, message, no traceback) -------------------------


def bench_cli(
    capsys: pytest.CaptureFixture[str], out: Path, *urls: str, extra: tuple = ()
) -> tuple[int, str]:
    argv = ["bench", "--lengths", "20", "--repeats", "1", "--turns", "0", "--out", str(out), *extra]
    argv += [arg for url in urls for arg in ("--replica-url", url)]
    code = cli.main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err


def test_refused_endpoint(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, err = bench_cli(capsys, tmp_path, closed_port_url(), extra=("--model", "tiny"))
    assert code == 2 and "connection refused" in err


def test_missing_metrics(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    replica = FakeReplica()
    routes = {("POST", "/v1/completions"): replica.complete}  # no /metrics
    with serve(routes) as s:
        code, err = bench_cli(capsys, tmp_path, s.url, extra=("--model", "tiny"))
    assert code == 2 and "/metrics: HTTP 404" in err


def test_metrics_without_samples(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    replica = FakeReplica()
    routes = {("POST", "/v1/completions"): replica.complete, ("GET", "/metrics"): as_text("<html>")}
    with serve(routes) as s:
        code, err = bench_cli(capsys, tmp_path, s.url, extra=("--model", "tiny"))
    assert code == 2 and "no Prometheus samples" in err


def test_non_streaming_server(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    replica = FakeReplica()
    routes = {**replica.routes(), ("POST", "/v1/completions"): as_json({"choices": [{"text": "x"}]})}
    with serve(routes) as s:
        code, err = bench_cli(capsys, tmp_path, s.url, extra=("--model", "tiny"))
    assert code == 2 and "instead of a stream" in err


def test_timeout(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    replica = FakeReplica()
    with serve(replica.routes()) as s:
        s.first_chunk_delay_s = 3.0
        code, err = bench_cli(capsys, tmp_path, s.url, extra=("--model", "tiny", "--timeout", "0.5"))
    assert code == 2 and "no answer within 0.5 s" in err


def test_no_model_listed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    replica = FakeReplica()
    with serve({**replica.routes(), ("GET", "/v1/models"): as_json({"data": []})}) as s:
        code, err = bench_cli(capsys, tmp_path, s.url)
    assert code == 2 and "lists no model; pass --model" in err


def test_no_replica_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, err = bench_cli(capsys, tmp_path)
    assert code == 2 and "--replica-url" in err
