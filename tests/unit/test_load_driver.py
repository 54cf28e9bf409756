"""How the load driver splits a trace over router replicas, names its routings and reads vLLM's results."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kvtier.engine_rig import router_flags
from kvtier.engine_rig.errors import RigError
from kvtier.load import driver, routing, workload


def test_every_request_goes_to_exactly_one_router_replica_in_order_and_the_split_is_seeded() -> None:
    requests = workload.generate(workload.Mix(requests=200, seed=4))
    shares = driver.split(requests, 2, seed=9)
    assert sorted((r for share in shares for r in share), key=requests.index) == requests
    for share in shares:
        assert [requests.index(r) for r in share] == sorted(requests.index(r) for r in share)
    assert 60 < len(shares[0]) < 140  # a fair coin: far outside this is a broken split
    assert driver.split(requests, 2, seed=9) == shares and driver.split(requests, 2, seed=10) != shares


def test_results_that_do_not_match_the_requests_sent_are_refused() -> None:
    share = workload.generate(workload.Mix(requests=3))
    data = {
        "ttfts": [0.1, 0.2],
        "itls": [[], []],
        "latencies": [1, 1],
        "output_lens": [16, 16],
        "errors": ["", ""],
    }
    with pytest.raises(RigError, match="2 results for 3 requests"):
        driver._records(share, data, 0)
    data = {k: [*v, v[0]] for k, v in data.items()}
    data["errors"][1] = "Bad Request"
    records = driver._records(share, data, 1)
    assert [r["ok"] for r in records] == [True, False, True] and records[1]["error"] == "Bad Request"
    assert all(r["router"] == 1 for r in records)


def test_with_flags_replaces_a_flag_and_appends_a_new_one() -> None:
    changed = routing.with_flags(
        ["--policy", "cache_aware", "--x", "1"], ["--policy", "power_of_two", "--y", "2"]
    )
    assert changed == ["--policy", "power_of_two", "--x", "1", "--y", "2"]


def test_a_candidate_routing_is_the_charts_flags_with_only_its_knobs_changed() -> None:
    chart, _ = router_flags.router_flags("roundrobin")
    flags, source = routing.flags("leastloaded")
    assert flags == routing.with_flags(chart, ["--policy", "power_of_two"]) and flags != chart
    assert source.startswith("candidate:")
    with pytest.raises(RigError, match="unknown routing 'fastest'"):
        routing.flags("fastest")


def test_a_failing_client_stops_the_point_with_its_output_and_stops_the_other_client(tmp_path: Path) -> None:
    """A stand-in for the engine venv's python: the client for router "fail" exits 3 at once, the one for
    "slow" would run for minutes; neither may outlive the point."""
    fake = tmp_path / "python"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$*" in *http://slow*) echo $$ > "$(dirname "$0")/slow.pid"; exec sleep 600;; esac\n'
        # Fail only once the slow one runs, so it is there to be stopped.
        'for i in $(seq 50); do [ -f "$(dirname "$0")/slow.pid" ] && break; sleep 0.1; done\n'
        "echo 'bench serve: the server refused'; exit 3\n"
    )
    fake.chmod(0o755)
    target = driver.Target(["http://fail", "http://slow"], "m", "tok")
    requests = workload.generate(workload.Mix(requests=40, seed=2))
    with pytest.raises(RigError, match=r"against http://fail exited 3:\n.*the server refused"):
        driver.run_point(fake, target, requests, workload.Mix(), 1.0, tmp_path / "work", split_seed=1)
    pid = int((tmp_path / "slow.pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_each_kvtier_load_run_gets_fresh_prompts_unless_told_which() -> None:
    """L2 outlives a run: the same prompts again would be served warm by the first run's chunks."""
    from kvtier import cli
    from kvtier.commands import load as load_command

    parser = cli.build_parser()
    fresh = [load_command._mix(parser.parse_args(["load"])).id_base for _ in range(3)]
    assert len(set(fresh)) == 3
    assert load_command._mix(parser.parse_args(["load", "--id-base", "7"])).id_base == 7
