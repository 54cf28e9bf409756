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
        need(False, "PyPI vllm-router not in the venv (make tools installs it)")
    return parse_router_args


def component(docs: list[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    return [d for d in find(docs, kind) if d["metadata"]["labels"].get("app.kubernetes.io/component") == name]


def container(deployment: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == name)


@pytest.mark.parametrize("strategy", ["prefixaware", "session", "roundrobin"])
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
    assert "--kv-events-config" not in container(engine, "vllm")["args"]


def test_kvaware_names_every_replica_and_its_kv_event_endpoint(parse) -> None:
    """The pinned vllm-router cannot build a discovered vLLM worker's KV-event identity (it asks
    /get_server_info, an SGLang endpoint), so kvaware uses a StatefulSet and static per-replica sources."""
    docs = render_docs(CHART, set_values={"routing.strategy": "kvaware"}, namespace="team-a")
    (router,) = component(docs, "Deployment", "router")
    (engine,) = component(docs, "StatefulSet", "engine")
    assert not component(docs, "Deployment", "engine")
    args = parse(container(router, "router")["args"])
    assert args.policy == "kv_aware" and args.service_discovery is False
    name = engine["metadata"]["name"]
    assert engine["spec"]["serviceName"] == name
    hosts = [f"{name}-{i}.{name}.team-a.svc" for i in range(engine["spec"]["replicas"])]
    assert args.worker_urls == [f"http://{h}:8000" for h in hosts]
    assert args.kv_event_source == [f"http://{h}:8000=tcp://{h}:5557" for h in hosts]
    assert args.kv_event_model == "Qwen/Qwen2-7B-Instruct"
    vllm_args = container(engine, "vllm")["args"]
    events = json.loads(vllm_args[vllm_args.index("--kv-events-config") + 1])
    assert events == {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": "tcp://*:5557"}
    ports = {p["name"]: p["containerPort"] for p in container(engine, "vllm")["ports"]}
    assert ports["kv-events"] == 5557
    (service,) = [s for s in find(docs, "Service") if s["metadata"]["name"] == name]
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    # No pod watch, so no Role and no token.
    assert not [r for r in find(docs, "Role") if r["metadata"]["name"].endswith("-router")]
    assert router["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


@pytest.mark.parametrize(
    "extra_args",
    [
        ["--block-size", "32"],
        ["--block_size=32"],  # vLLM's spelling of the same flag
        ["--block-size", "16", "--enforce-eager", "--block-size=32"],  # vLLM keeps the last
    ],
)
def test_kvaware_passes_a_custom_block_size_to_the_router(
    tmp_path: Path, parse, extra_args: list[str]
) -> None:
    model = yaml.safe_load((CHART / "values.yaml").read_text())["models"][0]
    model["extraArgs"] = extra_args
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"routing": {"strategy": "kvaware"}, "models": [model]}))
    (router,) = component(render_docs(CHART, values=[values]), "Deployment", "router")
    assert parse(container(router, "router")["args"]).kv_event_block_size == 32


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
    docs = render_docs(CHART, values=[CHART / "ci" / "custom-values.yaml"])  # kvaware, two models
    routers = component(docs, "Deployment", "router")
    assert [r["metadata"]["name"] for r in routers] == ["llm-small-a-router", "llm-small-b-router"]
    parsed = [parse(container(r, "router")["args"]) for r in routers]
    assert [len(a.worker_urls) for a in parsed] == [2, 0]  # each router names only its model's replicas
    assert parsed[0].worker_urls[1].startswith("http://llm-small-a-1.llm-small-a.")
    assert [a.kv_event_model for a in parsed] == ["Qwen/Qwen2-0.5B-Instruct", "Qwen/Qwen2-1.5B-Instruct"]
    args = parsed[0]
    assert (args.port, args.prometheus_port) == (18080, 19000)
    assert args.worker_urls[0].endswith(":18000") and args.kv_event_source[0].endswith(":15557")
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
