"""The router exposure rules judge a way into the routers by its harm: exposed without an API key is an
error, internal without one a warning, exposed with one a warning naming what the values leave open, and
an internal load balancer with a key passes (tools/kvtier/validate/checks/network_rules.py). An Ingress's
TLS is judged on the rendered Ingress, host by host, as the Ingress API matches hosts
(router-ingress-tls, tools/kvtier/validate/checks/ingress_tls.py): here on hand-built objects shaped like
the chart's, in tests/charts/test_router_exposure_render.py on the chart's own render."""

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
from kvtier.validate.rules import ManifestsContext, ValuesContext

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
        ({"router": {"httpRoute": {"enabled": True}}}, ["router.httpRoute.parentRefs"]),
    ],
    ids=["load balancer", "load balancer with ranges", "node port", "http route"],
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


def test_the_values_rules_leave_ingress_tls_to_the_render() -> None:
    """One home per concept: router.ingress.tls's shape says nothing of which hosts end up with TLS (the
    template keeps only the entries covering the model's hosts), so only router-ingress-tls judges it,
    on the rendered Ingress; the values rules say nothing of an Ingress with a key, even without TLS."""
    ingress = {"enabled": True, "hosts": {"qwen": ["llm.example.com"]}, "tls": []}
    assert _findings(_with_key({"router": {"ingress": ingress}})) == []


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


# -- router-ingress-tls: the rendered Ingress ------------------------------------------------------------

TLS_RULE = "router-ingress-tls"
MODEL_LABEL = "kv-tiered-inference/model"
ALB_CERT = "alb.ingress.kubernetes.io/certificate-arn"
GKE_MANAGED = "networking.gke.io/managed-certificates"


def _router_objects(
    hosts: list[str],
    tls: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    key: bool = True,
    model: str = "qwen",
) -> list[dict[str, Any]]:
    """A model's router Deployment, Service and Ingress as templates/router-*.yaml render them; "" in
    `hosts` is the rule for any host."""
    name = f"kv-{model}-router"
    labels = {"app.kubernetes.io/component": "router", MODEL_LABEL: model}
    router = {"name": "router", "command": ["vllm-router"], "args": ["--port", "8000"]}
    if key:
        router["args"] += ["--api-key", "$(VLLM_API_KEY)"]
        router["env"] = [
            {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": "kv-key", "key": "api-key"}}}
        ]
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {"template": {"metadata": {"labels": labels}, "spec": {"containers": [router]}}},
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels},
        "spec": {"selector": labels, "ports": [{"name": "http", "port": 8000}]},
    }
    path = {
        "path": "/",
        "pathType": "Prefix",
        "backend": {"service": {"name": name, "port": {"name": "http"}}},
    }
    rules = [{**({"host": h} if h else {}), "http": {"paths": [path]}} for h in hosts]
    ingress: dict[str, Any] = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "labels": labels, **({"annotations": annotations} if annotations else {})},
        "spec": {**({"tls": tls} if tls else {}), "rules": rules},
    }
    return [deployment, service, ingress]


def _tls_findings(objects: list[dict[str, Any]]) -> list[Any]:
    return catalogue.run_manifests(ManifestsContext(objects, "kv"), "env.yaml", only=[TLS_RULE])


def _flagged(objects: list[dict[str, Any]]) -> list[str]:
    """The rule hosts reported, as each finding's rendered rule names them ("" for any host)."""
    ingress = next(o for o in objects if o["kind"] == "Ingress")
    rules = ingress["spec"]["rules"]
    return [rules[int(f.path.split("[")[1].rstrip("]"))].get("host", "") for f in _tls_findings(objects)]


# (rule hosts, spec.tls, the hosts left in clear text): the Ingress API's matching, host form by host form.
COVER = {
    "a named host is covered, another is not": (
        ["llm.example.com", "api.example.com"],
        [{"secretName": "llm-tls", "hosts": ["llm.example.com"]}],
        ["api.example.com"],
    ),
    "a wildcard covers one label, not two, nor its parent": (
        ["a.example.com", "a.b.example.com", "example.com"],
        [{"secretName": "wild-tls", "hosts": ["*.example.com"]}],
        ["a.b.example.com", "example.com"],
    ),
    "a wildcard rule host needs the wildcard itself": (
        ["*.example.com", "*.llm.example.com"],
        [{"secretName": "tls", "hosts": ["a.example.com", "*.example.com"]}],
        ["*.llm.example.com"],
    ),
    "the rule for any host is not covered by named hosts": (
        ["", "llm.example.com"],
        [{"secretName": "llm-tls", "hosts": ["llm.example.com"]}],
        [""],
    ),
    "an entry without hosts covers the rule for any host": (
        [""],
        [{"secretName": "default-tls"}],
        [],
    ),
    "an entry without hosts covers named hosts too": (
        ["llm.example.com", "a.b.example.com"],
        [{"secretName": "default-tls"}],
        [],
    ),
    "another model's host covers nothing here": (
        ["llm.example.com"],
        [{"secretName": "other-tls", "hosts": ["other.example.com"]}],
        ["llm.example.com"],
    ),
}


@pytest.mark.parametrize(("hosts", "tls", "clear"), COVER.values(), ids=COVER.keys())
def test_each_rule_host_must_be_covered_by_a_tls_entry(hosts: list, tls: list, clear: list) -> None:
    assert _flagged(_router_objects(hosts, tls)) == clear
    # The same Ingress without its spec.tls leaves every host in clear text: the rule watches it.
    assert _flagged(_router_objects(hosts)) == hosts


def test_an_uncovered_host_is_an_error_naming_the_ingress_the_host_and_the_fix() -> None:
    objects = _router_objects(
        ["llm.example.com", "api.example.com"], [{"secretName": "llm-tls", "hosts": ["llm.example.com"]}]
    )
    [finding] = _tls_findings(objects)
    assert finding.rule == TLS_RULE and finding.severity == "error"
    assert finding.subject == "Ingress/kv-qwen-router" and finding.path == "spec.rules[1]"
    message = finding.message
    assert message.startswith("Ingress/kv-qwen-router host api.example.com: no spec.tls entry covers it")
    assert "spec.tls names llm.example.com" in message and "API key" in message
    assert "router.ingress.tls" in message and "hosts: [api.example.com]" in message
    assert "*.example.com" in message  # the wildcard one label up, as the other way to cover it


def test_the_rule_for_any_host_names_the_model_s_hosts_key_and_the_hosts_less_entry() -> None:
    [finding] = _tls_findings(_router_objects([""]))
    assert finding.severity == "error" and finding.path == "spec.rules[0]"
    assert "the rule for any host" in finding.message and "no spec.tls entry is rendered" in finding.message
    assert "router.ingress.hosts.qwen" in finding.message and "without hosts" in finding.message


@pytest.mark.parametrize(
    ("annotation", "confirm"),
    [(ALB_CERT, "aws elbv2 describe-listeners"), (GKE_MANAGED, "kubectl describe managedcertificate")],
    ids=["aws certificate-arn", "gke managed certificates"],
)
def test_tls_from_a_controller_annotation_is_a_warning_naming_how_to_confirm(
    annotation: str, confirm: str
) -> None:
    objects = _router_objects(["llm.example.com"], annotations={annotation: "cert-1"})
    [finding] = _tls_findings(objects)
    assert finding.severity == "warning" and finding.path == "spec.rules[0]"
    assert annotation in finding.message and confirm in finding.message
    covered = _router_objects(
        ["llm.example.com"], [{"hosts": ["llm.example.com"]}], annotations={annotation: "cert-1"}
    )
    assert _tls_findings(covered) == []


def test_without_an_api_key_the_exposure_error_speaks_instead() -> None:
    """No key: router-exposed-api-key (on the values) refuses the Ingress already, whatever its TLS; the
    same Ingress with the key is judged here."""
    assert _tls_findings(_router_objects(["llm.example.com"], key=False)) == []
    assert [f.severity for f in _tls_findings(_router_objects(["llm.example.com"]))] == ["error"]
    [finding] = _findings({"router": {"ingress": {"enabled": True, "hosts": {"qwen": ["llm.example.com"]}}}})
    assert finding.rule == "router-exposed-api-key" and finding.severity == "error"


def test_each_ingress_is_judged_by_the_pods_behind_it() -> None:
    """Two models' Ingresses: only the keyed one's hosts are reported, each under its own Ingress."""
    objects = [
        *_router_objects(["a.example.com"], model="a"),
        *_router_objects(["b.example.com"], "b", key=False),
    ]
    assert [f.subject for f in _tls_findings(objects)] == ["Ingress/kv-a-router"]
