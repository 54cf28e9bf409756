"""The charts' NetworkPolicies allow exactly the traffic each component needs, as network-config-analyzer
(tests/charts/netpol.py) computes it from the rendered workloads, policies and bystander pods."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from netpol import ALL, connectivity, missing, sanity
from render import NAMESPACE, render

from kvtier import paths

CPU = paths.ROOT / "values" / "cpu.yaml"
PROD = paths.ROOT / "values" / "prod-g6e-4xlarge.yaml"
DNS = {("UDP", 53), ("TCP", 53)}
ENGINE_PORT, KV_EVENTS, ROUTER_PORT, ROUTER_METRICS = 8000, 5557, 8080, 29000
MONITORING = '[{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]'


@pytest.fixture(scope="module")
def analyzer(need) -> None:
    need(not missing(), missing())


def _connectivity(tmp_path: Path, chart: str, values: list[Path], *extra: str):
    done = render(chart, values=values, extra=extra)
    assert done.returncode == 0, done.stderr
    return connectivity(done.stdout, NAMESPACE, tmp_path / "nca")


def test_engines_take_only_their_routers_and_the_test_pods(analyzer, tmp_path: Path) -> None:
    net = _connectivity(tmp_path, "kv-tiered-inference", [CPU])
    assert net.tcp("router", "engine") == {ENGINE_PORT}
    assert net.tcp("test", "engine") == {ENGINE_PORT}
    for outsider in ("stranger", "prometheus", "outside", "l2-eviction"):
        assert net.ports(outsider, "engine") == set(), outsider
    # The router is the front door: any client, on its HTTP port only.
    for client in ("stranger", "prometheus", "outside"):
        assert net.tcp(client, "router") == {ROUTER_PORT}, client
    # Engines send DNS and HTTPS (weights from the Hub) and nothing else.
    assert net.ports("engine", "outside") == DNS | {("TCP", 443)}
    assert net.ports("engine", "router") == set()


def test_kv_events_reach_only_the_routers(analyzer, tmp_path: Path) -> None:
    net = _connectivity(tmp_path, "kv-tiered-inference", [CPU], "--set", "routing.strategy=kvaware")
    assert net.tcp("router", "engine") == {ENGINE_PORT, KV_EVENTS}
    assert KV_EVENTS not in net.tcp("test", "engine")
    assert all(KV_EVENTS not in net.tcp(src, "engine") for src in ("stranger", "prometheus", "outside"))


def test_the_warmup_job_reaches_only_the_engines_and_takes_no_traffic(analyzer, tmp_path: Path) -> None:
    """With cache.warmup.prefixes, the hook Job's pods send to the engines' API port (and DNS) only."""
    warm = tmp_path / "warm.yaml"
    prefixes = {"qwen2-05b": {"system": {"text": "You answer briefly."}}}
    warm.write_text(json.dumps({"cache": {"warmup": {"prefixes": prefixes}}}))
    net = _connectivity(tmp_path, "kv-tiered-inference", [CPU, warm])
    assert net.tcp("l2-warmup", "engine") == {ENGINE_PORT}
    assert net.ports("l2-warmup", "outside") == DNS
    for other in ("router", "prometheus", "stranger", "l2-eviction", "test"):  # DNS goes to any address
        assert net.ports("l2-warmup", other) - DNS == set(), other
    for source in ("stranger", "prometheus", "outside", "router", "engine", "test"):
        assert net.ports(source, "l2-warmup") == set(), source
    # Without prefixes there is no warm-up pod, and the engines take nothing more.
    plain = _connectivity(tmp_path, "kv-tiered-inference", [CPU])
    assert "l2-warmup" not in {src for src, _ in plain.allowed}


def test_the_eviction_job_and_the_test_pods_take_no_traffic(analyzer, tmp_path: Path) -> None:
    net = _connectivity(tmp_path, "kv-tiered-inference", [CPU])
    sources = {src for src, _ in net.allowed}
    for closed in ("l2-eviction", "test"):
        assert not [src for src in sources if net.ports(src, closed)], closed
    assert not [dst for src, dst in net.allowed if src == "l2-eviction" and net.ports(src, dst)]


def test_metrics_scraper_reaches_metrics_ports_once_named(analyzer, tmp_path: Path) -> None:
    closed = _connectivity(tmp_path / "closed", "kv-tiered-inference", [CPU])
    assert closed.ports("prometheus", "engine") == set()
    assert closed.tcp("prometheus", "router") == {ROUTER_PORT}
    opened = _connectivity(
        tmp_path / "open",
        "kv-tiered-inference",
        [CPU],
        "--set-json",
        f"networkPolicy.metricsFrom={MONITORING}",
    )
    assert opened.tcp("prometheus", "engine") == {ENGINE_PORT}
    assert opened.tcp("prometheus", "router") == {ROUTER_PORT, ROUTER_METRICS}
    assert opened.ports("stranger", "engine") == set()


def test_clients_from_closes_the_router_to_everyone_else(analyzer, tmp_path: Path) -> None:
    net = _connectivity(
        tmp_path, "kv-tiered-inference", [CPU], "--set-json", f"networkPolicy.clientsFrom={MONITORING}"
    )
    assert net.tcp("prometheus", "router") == {ROUTER_PORT}
    assert net.ports("stranger", "router") == set()
    assert net.ports("outside", "router") == set()
    assert net.tcp("test", "router") == {ROUTER_PORT}


def test_curvine_is_closed_to_every_pod_but_its_own(analyzer, tmp_path: Path) -> None:
    net = _connectivity(tmp_path, "curvine", [])
    master, worker = {8995, 8996, 9000}, {8997, 9001}
    assert net.tcp("curvine-csi-node", "curvine-master") == master
    assert net.tcp("curvine-csi-node", "curvine-worker") == worker
    assert net.tcp("curvine-worker", "curvine-master") == master
    assert net.tcp("curvine-csi-controller", "curvine-master") == master
    for outsider in ("stranger", "prometheus", "outside"):
        for component in ("curvine-master", "curvine-worker", "curvine-csi-node", "curvine-csi-controller"):
            assert net.ports(outsider, component) == set(), (outsider, component)


def test_host_network_workers_are_admitted_by_node_range_only(analyzer, tmp_path: Path) -> None:
    net = _connectivity(
        tmp_path,
        "curvine",
        [],
        "--set",
        "worker.hostNetwork=true",
        "--set",
        "networkPolicy.nodeCIDRs={10.20.0.0/16}",
    )
    ranges = {src for src, dst in net.allowed if src.startswith("range:") and net.tcp(src, "curvine-master")}
    assert ranges == {"range:10.20.0.0-10.20.255.255"}
    assert net.ports("stranger", "curvine-master") == set()


def test_umbrella_with_curvine_keeps_the_two_charts_apart(analyzer, tmp_path: Path) -> None:
    net = _connectivity(
        tmp_path,
        "kv-tiered-inference",
        [PROD],
        "--set-json",
        'curvine.networkPolicy.nodeCIDRs=["10.0.0.0/8"]',
    )
    # Engines reach L2 through the FUSE mount, never Curvine's ports; Curvine's tests are not the chart's.
    assert net.ports("engine", "curvine-master") == set()
    assert net.ports("router", "curvine-worker") == set()
    assert net.ports("curvine-test", "engine") == set()
    assert net.tcp("router", "engine") == {ENGINE_PORT}


@pytest.mark.parametrize("chart,values", [("kv-tiered-inference", [CPU]), ("curvine", [])])
def test_no_policy_is_redundant_or_selects_nothing(
    analyzer, tmp_path: Path, chart: str, values: list[Path]
) -> None:
    done = render(chart, values=values)
    assert done.returncode == 0, done.stderr
    assert sanity(done.stdout, NAMESPACE, tmp_path) == ""


def test_all_marker_is_reported_for_unpoliced_bystanders(analyzer, tmp_path: Path) -> None:
    """The parse sees the analyzer's `All connections` (bystanders have no policy): the oracle is live."""
    net = _connectivity(tmp_path, "kv-tiered-inference", [CPU])
    assert ALL in net.ports("outside", "stranger")
