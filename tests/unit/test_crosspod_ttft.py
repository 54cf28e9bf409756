"""The cross-pod TTFT benchmark's logic (benchmarks/crosspod_ttft_bench.py): the probe against stand-in
replicas on 127.0.0.1 sharing a pretend L2, and the per-backend summary against numpy's quantiles (the
real engines through Curvine: the benchmark itself)."""

from __future__ import annotations

import json
import statistics
from types import SimpleNamespace
from typing import Any

import numpy
import pytest
from test_kvcheck_fakes import FakeReplica, Reply, as_json, serve

from harness import benchmark_scripts
from kvtier.bench import crosspod_probe, crosspod_summary
from kvtier.cluster.realnode import config as realconfig
from kvtier.errors import UserError

CHUNK = 256


class SharedL2Replica(FakeReplica):
    """A replica whose connector loads, in whole chunks, any prompt another replica stored in `l2`."""

    def __init__(self, l2: set[str]) -> None:
        super().__init__(hit_tokens=0)
        self.l2 = l2

    def complete(self, request: dict[str, Any]) -> Reply:
        prompt = str(request["prompt"])
        self.hit_tokens = len(prompt.split()) // CHUNK * CHUNK if prompt in self.l2 else 0
        self.l2.add(prompt)
        return super().complete(request)


def _tokenize(request: dict[str, Any]) -> Reply:
    return as_json({"count": len(str(request["prompt"]).split())})(request)


def test_the_probe_attributes_b_s_hits_to_the_prompt_a_stored_and_none_to_the_fresh_one(capsys) -> None:
    l2: set[str] = set()
    a, b = SharedL2Replica(l2), SharedL2Replica(l2)
    with serve({**a.routes(), ("POST", "/tokenize"): _tokenize}) as sa, serve(b.routes()) as sb:
        argv = ["--a", sa.url, "--b", sb.url, "--model", "m", "--trials", "3", "--warmup", "1"]
        assert crosspod_probe.main([*argv, "--min-tokens", "600", "--max-tokens", "700"]) == 0
    trials = json.loads(capsys.readouterr().out)["trials"]
    assert len(trials) == 3
    assert a.requests == 4  # the warm-up's prompt too; A never sees the cold prompts
    assert b.requests == 8  # each trial: the shared prompt and a fresh one
    for got in trials:
        assert 600 - 7 <= got["tokens"] <= 700 + 7  # the tokenizer's count, within sized_prompt's 1 %
        assert got["hit_tokens"] == got["tokens"] // CHUNK * CHUNK > 0
        assert got["cold_hit_tokens"] == 0
    assert [t["cold_first"] for t in trials] == [True, False, True]  # alternating after the warm-up


def test_the_probe_reports_an_unreachable_engine_as_json(capsys) -> None:
    with serve({}) as dead:
        assert crosspod_probe.main(["--a", dead.url, "--b", dead.url, "--model", "m", "--trials", "1"]) == 1
    assert "/tokenize" in json.loads(capsys.readouterr().out)["error"]


def test_one_trial_per_call_draws_the_same_length_for_each_backend(capsys) -> None:
    """The benchmark interleaves the backends one trial at a time: a trial's number, not the calls before it,
    sets its prompt length and which of B's requests goes first."""
    lengths = {}
    for backend in ("first", "second"):
        l2: set[str] = set()
        a, b = SharedL2Replica(l2), SharedL2Replica(l2)
        with serve({**a.routes(), ("POST", "/tokenize"): _tokenize}) as sa, serve(b.routes()) as sb:
            got = []
            for number in (3, 4):
                argv = ["--a", sa.url, "--b", sb.url, "--model", "m", "--trials", "1", "--warmup", "0"]
                argv += ["--min-tokens", "300", "--max-tokens", "900", "--number", str(number)]
                assert crosspod_probe.main(argv) == 0
                [trial] = json.loads(capsys.readouterr().out)["trials"]
                got.append(trial)
        assert [t["number"] for t in got] == [3, 4] and [t["cold_first"] for t in got] == [True, False]
        assert all(t["load1"] >= 0 for t in got)
        lengths[backend] = [t["tokens"] for t in got]
    assert lengths["first"] == lengths["second"]
    assert lengths["first"][0] != lengths["first"][1]  # the two numbers draw different lengths


def _trial(hit: float, cold: float, hits: float | None, tokens: int = 1200) -> dict[str, Any]:
    return {"hit_ttft_s": hit, "cold_ttft_s": cold, "hit_tokens": hits, "tokens": tokens}


def test_a_backend_summary_leaves_trials_without_a_hit_out_of_the_hit_figures() -> None:
    hits = [0.05 + 0.01 * i for i in range(20)]
    colds = [0.4 + 0.02 * i for i in range(21)]
    trials = [_trial(h, c, 1024) for h, c in zip(hits, colds, strict=False)]
    trials.append(_trial(9.0, colds[20], 0))  # B loaded nothing: no cross-pod hit to time
    got = crosspod_summary.backend(trials)
    assert (got["trials"], got["invalid"]) == (21, 1)
    assert got["hit"]["n"] == 20 and got["cold"]["n"] == 21
    assert got["hit"]["median_s"] == pytest.approx(float(numpy.median(hits)))
    assert got["hit"]["p95_s"] == pytest.approx(float(numpy.percentile(hits, 95, method="inverted_cdf")))
    assert got["cold"]["p95_s"] == pytest.approx(float(numpy.percentile(colds, 95, method="inverted_cdf")))
    assert got["speedup"] == pytest.approx(statistics.median(colds) / statistics.median(hits))
    assert got["hit_tokens_median"] == 1024


@pytest.mark.parametrize("count", [1, 2, 9, 10, 19, 37])
def test_nearest_rank_matches_numpy_s_inverted_cdf(count: int) -> None:
    values = [((7 * i) % count) * 0.5 for i in range(count)]
    for quantile in (0.5, 0.9, 0.95):
        expected = numpy.percentile(values, quantile * 100, method="inverted_cdf")
        assert crosspod_summary.nearest_rank(values, quantile) == pytest.approx(float(expected))


def test_the_ratio_is_none_where_a_backend_had_no_valid_trial() -> None:
    valid = crosspod_summary.backend([_trial(0.1, 0.5, 256), _trial(0.3, 0.7, 512)])
    none_hit = crosspod_summary.backend([_trial(0.1, 0.5, 0), _trial(0.2, 0.6, None)])
    assert none_hit["hit"] is None and none_hit["speedup"] is None
    assert crosspod_summary.ratio(none_hit, valid) is None
    assert crosspod_summary.ratio(valid, valid) == pytest.approx(1.0)
    assert crosspod_summary.ratio(none_hit, valid, "cold") == pytest.approx(0.55 / 0.6)


def test_the_paired_ratio_is_the_median_of_each_numbers_ratio_where_both_hit() -> None:
    def trial(number: int, hit: float, hits: int = 512) -> dict[str, Any]:
        return {**_trial(hit, 1.0, hits), "number": number}

    candidate = [trial(0, 0.2), trial(1, 0.9), trial(2, 0.3), trial(3, 0.5, hits=0), trial(4, 0.1)]
    baseline = [trial(0, 0.1), trial(1, 0.3), trial(2, 0.3), trial(3, 0.1), trial(5, 0.1)]
    # numbers 0, 1, 2 pair up (3: the candidate loaded nothing; 4 and 5 have no partner)
    assert crosspod_summary.paired_ratio(candidate, baseline) == pytest.approx(
        statistics.median([2.0, 3.0, 1.0])
    )
    assert crosspod_summary.paired_ratio(candidate[3:4], baseline) is None


@pytest.fixture(scope="module")
def bench() -> Any:
    return benchmark_scripts.load("crosspod_ttft_bench")


class PodsKube:
    """What the benchmark's `_engines` asks of a cluster: its nodes and `kubectl get pods -o json`."""

    def __init__(self, nodes: int, placed: dict[str, str]) -> None:
        self.cluster = SimpleNamespace(nodes=realconfig.nodes("xp", nodes))
        self.placed = placed  # pod name -> node name

    def kubectl(self, *args: str) -> str:
        items = [
            {"metadata": {"name": pod}, "spec": {"nodeName": node}, "status": {"podIP": f"10.0.0.{i}"}}
            for i, (pod, node) in enumerate(self.placed.items(), start=1)
        ]
        return json.dumps({"items": items})


def test_across_two_nodes_a_is_the_engine_on_node_1_whatever_the_pod_names(bench: Any) -> None:
    kube = PodsKube(2, {"kv-a": "real-node-2", "kv-b": "real-node"})
    assert bench._engines(kube, "ns") == ["http://10.0.0.2:8000", "http://10.0.0.1:8000"]


def test_across_two_nodes_both_engines_on_one_node_is_refused_with_where_they_ran(bench: Any) -> None:
    kube = PodsKube(2, {"kv-a": "real-node", "kv-b": "real-node"})
    with pytest.raises(UserError, match=r"one engine on each of .*'kv-b': 'real-node'.*topologySpread"):
        bench._engines(kube, "ns")


def test_on_one_node_a_and_b_go_by_pod_name(bench: Any) -> None:
    kube = PodsKube(1, {"kv-b": "real-node", "kv-a": "real-node"})
    assert bench._engines(kube, "ns") == ["http://10.0.0.2:8000", "http://10.0.0.1:8000"]


@pytest.mark.parametrize(("nodes", "ok"), [(1, False), (2, True)])
def test_the_goal_follows_the_node_count(bench: Any, nodes: int, ok: bool) -> None:
    def backend(hit: float) -> dict[str, Any]:
        return {"trials": [{**_trial(hit, 1.0, 512), "number": n} for n in range(3)]}

    payload = {"nodes": nodes, "backends": {"hostPath": backend(0.1), "curvine": backend(0.14)}}
    assert bench.summarize(payload) is ok
    assert payload["goal"] == {1: 1.25, 2: 1.5}[nodes]
