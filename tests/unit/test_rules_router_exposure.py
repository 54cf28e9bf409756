"""The router exposure rules judge a way into the routers by its harm: exposed without an API key is an
error, internal without one a warning, exposed with one a warning naming what the values leave open, and
an internal load balancer with a key passes (tools/kvtier/validate/checks/network_rules.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kvtier import paths
from kvtier.validate import catalogue
from kvtier.validate.inputs import loader
from kvtier.validate.inputs.origins import Origins
from kvtier.validate.layers import kube
from kvtier.validate.rules import ValuesContext

RULES = ("router-exposed-api-key", "router-exposed-checks", "router-exposure-networkpolicy")
KEY = {"auth": {"apiKeySecret": {"name": "kv-key"}}}
SCHEME = "service.beta.kubernetes.io/aws-load-balancer-scheme"
LEGACY = "service.beta.kubernetes.io/aws-load-balancer-internal"
CERT = "service.beta.kubernetes.io/aws-load-balancer-ssl-cert"
PEER = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}]


def _findings(values: dict[str, Any]) -> list[Any]:
    loaded = loader.load_text(yaml.safe_dump(values, sort_keys=False), Path("env.yaml"))
    context = ValuesContext(loaded.data, loaded, origins=Origins([loaded]))
    return catalogue.run_values(context, only=list(RULES))


def _service(service_type: str, **settings: Any) -> dict[str, Any]:
    return {"router": {"service": {"type": service_type, **settings}}}


def _with_key(values: dict[str, Any]) -> dict[str, Any]:
    return {**values, **KEY}


EXPOSED = {
    "load balancer, no annotation": _service("LoadBalancer"),
    "load balancer, internet-facing": _service("LoadBalancer", annotations={SCHEME: "internet-facing"}),
    # Conflicting annotations: the internet-facing one decides.
    "load balancer, both": _service("LoadBalancer", annotations={SCHEME: "internet-facing", LEGACY: "true"}),
    "load balancer, legacy false": _service("LoadBalancer", annotations={LEGACY: "false"}),
    "node port": _service("NodePort"),
    "ingress": {"router": {"ingress": {"enabled": True}}},
    "http route": {"router": {"httpRoute": {"enabled": True}}},
}
INTERNAL = {
    "scheme internal": _service("LoadBalancer", annotations={SCHEME: "internal"}),
    "legacy internal": _service("LoadBalancer", annotations={LEGACY: "true"}),
}


@pytest.mark.parametrize("values", EXPOSED.values(), ids=EXPOSED.keys())
def test_an_exposed_router_without_a_key_is_an_error_naming_the_key_and_the_fix(values: dict) -> None:
    [finding] = _findings(values)
    assert finding.rule == "router-exposed-api-key" and finding.severity == "error"
    assert "auth.apiKeySecret.name is empty" in finding.message
    assert "kubectl create secret generic" in finding.message
    assert finding.path in ("router.service.type", "router.ingress.enabled", "router.httpRoute.enabled")


@pytest.mark.parametrize("values", INTERNAL.values(), ids=INTERNAL.keys())
def test_an_internal_load_balancer_without_a_key_is_a_warning(values: dict) -> None:
    [finding] = _findings(values)
    assert finding.rule == "router-exposed-api-key" and finding.severity == "warning"
    assert "(internal) without an API key" in finding.message and finding.path == "router.service.type"


@pytest.mark.parametrize("values", INTERNAL.values(), ids=INTERNAL.keys())
def test_an_internal_load_balancer_with_a_key_is_fine(values: dict) -> None:
    assert _findings(_with_key(values)) == []


@pytest.mark.parametrize(
    ("values", "names"),
    [
        (_service("LoadBalancer"), ["router.service.loadBalancerSourceRanges", CERT]),
        (_service("LoadBalancer", loadBalancerSourceRanges=["203.0.113.0/24"]), [CERT]),
        (_service("NodePort"), ["security groups", "plain HTTP"]),
        ({"router": {"ingress": {"enabled": True}}}, ["router.ingress.tls"]),
        ({"router": {"httpRoute": {"enabled": True}}}, ["router.httpRoute.parentRefs"]),
    ],
    ids=["load balancer", "load balancer with ranges", "node port", "ingress", "http route"],
)
def test_an_exposed_router_with_a_key_is_a_warning_naming_what_to_check(values: dict, names: list) -> None:
    [finding] = _findings(_with_key(values))
    assert finding.rule == "router-exposed-checks" and finding.severity == "warning"
    assert all(name in finding.message for name in names), finding.message


def test_a_closed_load_balancer_with_tls_and_a_tls_ingress_pass_with_a_key() -> None:
    closed = _service(
        "LoadBalancer", annotations={CERT: "arn:aws:acm:x"}, loadBalancerSourceRanges=["10.0.0.0/8"]
    )
    tls = {"enabled": True, "tls": [{"secretName": "llm-tls", "hosts": ["llm.example.com"]}]}
    assert _findings(_with_key(closed)) == []
    assert _findings(_with_key({"router": {"ingress": tls}})) == []


def test_the_in_cluster_router_and_the_hyperpod_target_say_nothing() -> None:
    assert _findings({}) == []
    assert _findings(_service("ClusterIP")) == []
    assert _findings({"target": "hyperpod", **_service("LoadBalancer")}) == []


def test_restricted_clients_must_name_the_way_in() -> None:
    restricted = {**_with_key({"router": {"ingress": {"enabled": True, "tls": [{"hosts": ["a.example"]}]}}})}
    restricted["networkPolicy"] = {"clientsFrom": PEER}
    [finding] = _findings(restricted)
    assert finding.rule == "router-exposure-networkpolicy" and finding.path == "networkPolicy.clientsFrom"
    assert "networkPolicy.exposedFrom" in finding.suggestion
    restricted["networkPolicy"]["exposedFrom"] = PEER
    assert _findings(restricted) == []
    restricted["networkPolicy"] = {"clientsFrom": PEER, "enabled": False}
    assert _findings(restricted) == []


def test_every_environment_keeps_its_routers_in_the_cluster() -> None:
    """values/ environments stay ClusterIP with no Ingress or route (docs/cluster.md "Network rule")."""
    files = sorted(paths.VALUES.glob("*.yaml"))
    assert files
    for file in files:
        loaded = loader.load(file)
        context = ValuesContext(loaded.data, loaded, origins=Origins([loaded]))
        assert catalogue.run_values(context, only=list(RULES)) == [], file.name


def test_gateway_api_is_judged_as_a_custom_resource_not_as_unserved_kubernetes() -> None:
    """validate's kube layer: no schema for an HTTPRoute means a CRD (the cluster tests judge it), not a
    Kubernetes version that lacks the kind."""
    assert not kube.builtin_group("gateway.networking.k8s.io/v1")
    assert kube.builtin_group("networking.k8s.io/v1")


def test_a_route_must_name_a_model_the_values_serve() -> None:
    values = {
        "models": [{"name": "qwen"}],
        "router": {"ingress": {"enabled": True, "hosts": {"qwen": [], "llama": ["a.example"]}}},
    }
    loaded = loader.load_text(yaml.safe_dump(values, sort_keys=False), Path("env.yaml"))
    context = ValuesContext(loaded.data, loaded, origins=Origins([loaded]))
    [finding] = catalogue.run_values(context, only=["router-route-models"])
    assert finding.path == "router.ingress.hosts.llama" and finding.severity == "warning"
    values["router"] = {"httpRoute": {"enabled": True}}
    loaded = loader.load_text(yaml.safe_dump(values, sort_keys=False), Path("env.yaml"))
    context = ValuesContext(loaded.data, loaded, origins=Origins([loaded]))
    [finding] = catalogue.run_values(context, only=["router-route-models"])
    assert finding.path == "router.httpRoute.enabled" and "names no model" in finding.message
