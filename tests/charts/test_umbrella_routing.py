"""Every routing.strategy renders the intended vllm-router flags, read back with the real router's own
argument parser (PyPI vllm-router), and the engines get what that policy needs (KV events for kvaware)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from render import find, helm_bin, render, render_docs

from kvtier import helm, paths

CHART = paths.CHARTS / "kv-tiered-inference"
POLICIES = {
    "prefixaware": "cache_aware",
    "kvaware": "kv_aware",
    "session": "consistent_hash",
    "roundrobin": "round_robin",
}


@pytest.fixture(autouse=True)
def _deps(need) -> None:
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    helm.build_dependencies(CHART)


@pytest.fixture
def parse(need):
    """vllm-router's own CLI parser: unknown or malformed flags make it exit, failing the test."""
    try:
        from vllm_router.launch_router import parse_router_args
    except ImportError:
        need(False, "PyPI vllm-router not installed in the venv (pip install vllm-router==0.1.17)")
    return parse_router_args


def component(docs: list[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    return [d for d in find(docs, kind) if d["metadata"]["labels"].get("app.kubernetes.io/component") == name]


def container(deployment: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == name)


@pytest.mark.parametrize("strategy", sorted(POLICIES))
def test_strategy_maps_to_router_policy_and_discovery(strategy: str, parse) -> None:
    docs = render_docs(CHART, set_values={"routing.strategy": strategy}, namespace="team-a")
    (router,) = component(docs, "Deployment", "router")
    (engine,) = component(docs, "Deployment", "engine")
    args = parse(container(router, "router")["args"])
    assert args.policy == POLICIES[strategy]
    assert args.host == "0.0.0.0" and args.port == 8080
    assert (args.prometheus_host, args.prometheus_port) == ("0.0.0.0", 29000)
    # Kubernetes discovery of exactly this model's engine pods, in the release namespace only.
    assert args.service_discovery is True
    assert args.service_discovery_namespace == "team-a"
    assert args.service_discovery_port == 8000
    assert args.selector == engine["spec"]["selector"]["matchLabels"]
    assert args.selector.items() <= engine["spec"]["template"]["metadata"]["labels"].items()
    vllm_args = container(engine, "vllm")["args"]
    if strategy == "kvaware":
        events = json.loads(vllm_args[vllm_args.index("--kv-events-config") + 1])
        assert events == {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": "tcp://*:5557"}
        ports = {p["name"]: p["containerPort"] for p in container(engine, "vllm")["ports"]}
        assert ports["kv-events"] == 5557
    else:
        assert "--kv-events-config" not in vllm_args


def test_discovery_rbac_is_namespaced_and_read_only() -> None:
    docs = render_docs(CHART)
    assert not find(docs, "ClusterRole", "rel-kv-tiered-inference-router")
    (role,) = [r for r in find(docs, "Role") if r["metadata"]["name"] == "rel-kv-tiered-inference-router"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    (binding,) = [
        b for b in find(docs, "RoleBinding") if b["metadata"]["name"] == "rel-kv-tiered-inference-router"
    ]
    (router,) = component(docs, "Deployment", "router")
    assert binding["subjects"][0]["name"] == router["spec"]["template"]["spec"]["serviceAccountName"]


def test_static_workers_with_kv_events(tmp_path: Path, parse) -> None:
    workers = [
        {"url": "http://engine-0.example:8000", "kvEvents": "tcp://engine-0.example:5557"},
        {"url": "http://engine-1.example:8000", "kvEvents": "tcp://engine-1.example:5557"},
    ]
    values = tmp_path / "static.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "routing": {"strategy": "kvaware"},
                "router": {"discovery": {"mode": "static", "staticWorkers": {"qwen2-7b": workers}}},
            }
        )
    )
    docs = render_docs(CHART, values=[values])
    (router,) = component(docs, "Deployment", "router")
    args = parse(container(router, "router")["args"])
    assert args.policy == "kv_aware"
    assert args.service_discovery is False
    assert args.worker_urls == [w["url"] for w in workers]
    assert args.kv_event_source == [f"{w['url']}={w['kvEvents']}" for w in workers]
    assert args.kv_event_model == "Qwen/Qwen2-7B-Instruct"
    assert router["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    assert not [r for r in find(docs, "Role") if r["metadata"]["name"].endswith("-router")]


def test_static_kvaware_without_event_endpoint_is_refused(tmp_path: Path) -> None:
    values = tmp_path / "static.yaml"
    workers = {"qwen2-7b": [{"url": "http://engine-0.example:8000"}]}
    values.write_text(
        yaml.safe_dump(
            {
                "routing": {"strategy": "kvaware"},
                "router": {"discovery": {"mode": "static", "staticWorkers": workers}},
            }
        )
    )
    result = render(CHART, values=[values])
    assert result.returncode != 0
    assert "needs kvEvents" in result.stderr


def test_each_model_gets_its_own_router(parse) -> None:
    docs = render_docs(CHART, values=[CHART / "ci" / "custom-values.yaml"])
    routers = component(docs, "Deployment", "router")
    assert [r["metadata"]["name"] for r in routers] == ["llm-small-a-router", "llm-small-b-router"]
    selectors = [parse(container(r, "router")["args"]).selector for r in routers]
    assert [s["kv-tiered-inference/model"] for s in selectors] == ["small-a", "small-b"]
    args = parse(container(routers[0], "router")["args"])
    assert (args.port, args.prometheus_port, args.service_discovery_port) == (18080, 19000, 18000)
    assert args.cache_threshold == 0.5  # router.extraArgs pass through
    hpas = find(docs, "HorizontalPodAutoscaler")
    assert [h["spec"]["scaleTargetRef"]["name"] for h in hpas] == ["llm-small-a-router", "llm-small-b-router"]
    assert all("replicas" not in r["spec"] for r in routers), "the HPA owns replicas"


def test_router_probes_use_its_health_endpoints() -> None:
    (router,) = component(render_docs(CHART), "Deployment", "router")
    c = container(router, "router")
    assert c["livenessProbe"]["httpGet"]["path"] == "/liveness"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readiness"
    (pdb,) = component(render_docs(CHART), "PodDisruptionBudget", "router")
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": router["spec"]["selector"]}
