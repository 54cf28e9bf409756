"""The router's ways in from outside (router.service NodePort/LoadBalancer, router.ingress, router.httpRoute):
the values schema takes them, every combination renders with Helm 3 and 4 and passes the strict Kubernetes
schemas of 1.30 to 1.35 (the HTTPRoute, a custom resource, is judged by the API server in
tests/cluster/test_router_httproute_on_apiserver.py), the routes lead to the router Service's HTTP port,
the NetworkPolicy lets networkPolicy.exposedFrom in while a way in is on, and `kvtier validate` judges
the exposure: an Ingress's TLS on the rendered Ingress, host form by host form (router-ingress-tls)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from netpol import LIVESIM_INGRESS_NAMESPACE, connectivity, missing
from render import NAMESPACE, find, helm_bin, render, render_docs

from kvtier import helm, paths
from kvtier.cli import main
from kvtier.validate.layers import kube

CHART = paths.CHARTS / "kv-tiered-inference"
CPU = paths.VALUES / "cpu.yaml"
MODEL = "qwen2-05b"  # values/cpu.yaml's model
MINORS = ("1.30", "1.31", "1.32", "1.33", "1.34", "1.35")
INTERNAL = {"service.beta.kubernetes.io/aws-load-balancer-scheme": "internal"}
KEY = {"auth": {"apiKeySecret": {"name": "kv-key"}}}
INGRESS = {
    "enabled": True,
    "className": "nginx",
    "annotations": {"nginx.ingress.kubernetes.io/proxy-read-timeout": "600"},
    "hosts": {MODEL: ["llm.example.com", "*.llm.example.com"]},
    "paths": [{"path": "/v1", "pathType": "Prefix"}, {"path": "/health", "pathType": "Exact"}],
    "tls": [
        {"secretName": "llm-tls", "hosts": ["llm.example.com"]},
        {"secretName": "other-tls", "hosts": ["other.example.com"]},
    ],
}
HTTP_ROUTE = {
    "enabled": True,
    "parentRefs": [{"name": "gw", "namespace": "infra", "sectionName": "https", "port": 443}],
    "hostnames": {MODEL: ["llm.example.com"]},
    "paths": [{"type": "PathPrefix", "value": "/v1"}],
}
COMBOS: dict[str, dict[str, Any]] = {
    "internal load balancer": {
        "router": {
            "service": {
                "type": "LoadBalancer",
                "annotations": INTERNAL,
                "loadBalancerClass": "service.k8s.aws/nlb",
                "loadBalancerSourceRanges": ["10.0.0.0/8", "192.168.0.0/16"],
            }
        },
        **KEY,
    },
    "legacy internal load balancer": {
        "router": {
            "service": {
                "type": "LoadBalancer",
                "annotations": {"service.beta.kubernetes.io/aws-load-balancer-internal": "true"},
            }
        }
    },
    "node port": {"router": {"service": {"type": "NodePort"}}, **KEY},
    "ingress": {"router": {"ingress": INGRESS}, **KEY},
    "ingress for any host": {"router": {"ingress": {"enabled": True, "hosts": {MODEL: []}}}, **KEY},
    "ingress for any host with the default certificate": {
        "router": {
            "ingress": {"enabled": True, "hosts": {MODEL: []}, "tls": [{"secretName": "default-tls"}]}
        },
        **KEY,
    },
    "http route": {"router": {"httpRoute": HTTP_ROUTE}, **KEY},
    "http route for the listeners' hosts": {
        "router": {"httpRoute": {"enabled": True, "parentRefs": [{"name": "gw"}], "hostnames": {MODEL: []}}},
        **KEY,
    },
    "everything": {
        "router": {
            "service": {
                "type": "LoadBalancer",
                "annotations": INTERNAL,
                "loadBalancerSourceRanges": ["10.0.0.0/8"],
            },
            "ingress": INGRESS,
            "httpRoute": HTTP_ROUTE,
        },
        "networkPolicy": {
            "clientsFrom": [{"podSelector": {"matchLabels": {"app": "client"}}}],
            "exposedFrom": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "infra"}}}],
        },
        **KEY,
    },
}


@pytest.fixture(scope="module", autouse=True)
def _chart(need) -> None:
    need(helm_bin(3).exists() and helm_bin(4).exists(), "pinned Helm 3 and 4 not built (make tools)")
    helm.build_dependencies(CHART)


def _file(tmp_path: Path, values: dict[str, Any]) -> Path:
    path = tmp_path / "exposure.yaml"
    path.write_text(yaml.safe_dump(values, sort_keys=False))
    return path


def _router_service(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The router Service clients reach (its HTTP port); an exposed router's metrics Service is not it."""
    [service] = [
        d
        for d in find(docs, "Service")
        if d["metadata"]["labels"]["app.kubernetes.io/component"] == "router"
        and "http" in {p["name"] for p in d["spec"]["ports"]}
    ]
    return service


@pytest.mark.parametrize("major", [3, 4])
@pytest.mark.parametrize("combo", COMBOS, ids=list(COMBOS))
def test_every_combination_renders_and_passes_the_kubernetes_schemas(
    combo: str, major: int, tmp_path: Path
) -> None:
    values = COMBOS[combo]
    docs = render_docs(CHART, major=major, values=[CPU, _file(tmp_path, values)])
    problems = []
    for doc in docs:
        for minor in MINORS:
            errors = kube.check(doc, minor)
            if errors is None:
                assert not kube.builtin_group(doc["apiVersion"]), f"{doc['kind']} has no schema in {minor}"
                continue
            problems += [f"{doc['kind']}/{doc['metadata']['name']} @{minor}: {e}" for e in errors]
    assert not problems, "\n".join(problems[:40])

    service = _router_service(docs)
    wanted = values["router"].get("service", {})
    assert service["spec"]["type"] == wanted.get("type", "ClusterIP")
    assert service["metadata"].get("annotations", {}) == wanted.get("annotations", {})
    assert service["spec"].get("loadBalancerClass") == wanted.get("loadBalancerClass")
    assert service["spec"].get("loadBalancerSourceRanges") == wanted.get("loadBalancerSourceRanges")
    assert "loadBalancerIP" not in service["spec"] and "externalIPs" not in service["spec"]
    http = {p["name"]: p["port"] for p in service["spec"]["ports"]}["http"]

    ingresses, routes = find(docs, "Ingress"), find(docs, "HTTPRoute")
    assert len(ingresses) == int(values["router"].get("ingress", {}).get("enabled", False))
    assert len(routes) == int(values["router"].get("httpRoute", {}).get("enabled", False))
    for ingress in ingresses:
        assert ingress["metadata"]["labels"]["app.kubernetes.io/component"] == "router"
        for rule in ingress["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                assert path["backend"]["service"] == {
                    "name": service["metadata"]["name"],
                    "port": {"name": "http"},
                }
    for route in routes:
        assert route["metadata"]["labels"]["app.kubernetes.io/component"] == "router"
        [rule] = route["spec"]["rules"]
        assert rule["backendRefs"] == [{"name": service["metadata"]["name"], "port": http}]


def test_the_ingress_carries_its_hosts_paths_and_only_its_own_tls(tmp_path: Path) -> None:
    docs = render_docs(CHART, values=[CPU, _file(tmp_path, COMBOS["ingress"])])
    [ingress] = find(docs, "Ingress")
    spec = ingress["spec"]
    assert spec["ingressClassName"] == "nginx"
    assert ingress["metadata"]["annotations"] == INGRESS["annotations"]
    assert [r["host"] for r in spec["rules"]] == INGRESS["hosts"][MODEL]
    assert [(p["path"], p["pathType"]) for p in spec["rules"][0]["http"]["paths"]] == [
        (p["path"], p["pathType"]) for p in INGRESS["paths"]
    ]
    assert spec["tls"] == [INGRESS["tls"][0]]  # other.example.com is not one of its hosts
    anywhere = render_docs(CHART, values=[CPU, _file(tmp_path, COMBOS["ingress for any host"])])
    [rule] = find(anywhere, "Ingress")[0]["spec"]["rules"]
    assert "host" not in rule and "tls" not in find(anywhere, "Ingress")[0]["spec"]


def test_the_ingress_keeps_every_tls_entry_that_covers_its_hosts(tmp_path: Path) -> None:
    """As the Ingress API matches hosts: a wildcard one label above a host, and an entry without hosts
    (the controller's default certificate), which alone covers the rule for any host."""
    tls = [
        {"secretName": "wildcard-tls", "hosts": ["*.example.com"]},
        {"secretName": "com-tls", "hosts": ["*.com"]},  # two labels above llm.example.com: not it
        {"secretName": "default-tls"},
    ]
    named = {"router": {"ingress": {"enabled": True, "hosts": {MODEL: ["llm.example.com"]}, "tls": tls}}}
    [ingress] = find(render_docs(CHART, values=[CPU, _file(tmp_path, named)]), "Ingress")
    assert ingress["spec"]["tls"] == [tls[0], tls[2]]
    anywhere = {"router": {"ingress": {"enabled": True, "hosts": {MODEL: []}, "tls": tls}}}
    [ingress] = find(render_docs(CHART, values=[CPU, _file(tmp_path, anywhere)]), "Ingress")
    assert ingress["spec"]["tls"] == [tls[2]]


def test_the_http_route_carries_its_parents_hostnames_and_paths(tmp_path: Path) -> None:
    docs = render_docs(CHART, values=[CPU, _file(tmp_path, COMBOS["http route"])])
    [route] = find(docs, "HTTPRoute")
    assert route["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert route["spec"]["parentRefs"] == HTTP_ROUTE["parentRefs"]
    assert route["spec"]["hostnames"] == HTTP_ROUTE["hostnames"][MODEL]
    assert route["spec"]["rules"][0]["matches"] == [{"path": p} for p in HTTP_ROUTE["paths"]]


def test_defaults_keep_the_router_in_the_cluster() -> None:
    docs = render_docs(CHART, values=[CPU])
    service = _router_service(docs)
    assert service["spec"]["type"] == "ClusterIP"
    assert not {"loadBalancerClass", "loadBalancerSourceRanges"} & set(service["spec"])
    assert find(docs, "Ingress") == [] and find(docs, "HTTPRoute") == []


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    """matchLabels as the API server reads it: every pair present in the labels."""
    return selector.items() <= labels.items()


@pytest.mark.parametrize("service_type", ["ClusterIP", "NodePort", "LoadBalancer"])
def test_prometheus_scrapes_each_router_once_and_only_inside_the_cluster(
    service_type: str, tmp_path: Path
) -> None:
    """vllm-router serves /metrics on its own port without the API key: no Service of another type may
    carry that port. The ServiceMonitor's selector and endpoint port decide its targets (prometheus-operator
    keeps the endpoints of the selected Services whose port has the endpoint's name), so each router pod is
    scraped through one Service; the router alerts match that Service's name (the `service` target label)."""
    base = yaml.safe_load(CPU.read_text())
    second = {**base["models"][0], "name": "second"}
    values = {
        "models": [*base["models"], second],
        "router": {"service": {"type": service_type}},
        "metrics": {
            "serviceMonitor": {"enabled": True},
            "prometheusRule": {"enabled": True, "assumeApiServed": True},
        },
        **KEY,
    }
    docs = render_docs(CHART, values=[CPU, _file(tmp_path, values)])
    [monitor] = find(docs, "ServiceMonitor")
    [endpoint] = monitor["spec"]["endpoints"]
    services = find(docs, "Service")
    for service in services:
        ports = service["spec"]["ports"]
        if service["spec"].get("type", "ClusterIP") != "ClusterIP":
            assert [p["name"] for p in ports] == ["http"], service["metadata"]["name"]
            assert "metrics" not in {str(p.get("targetPort")) for p in ports}
    selected = [
        s
        for s in services
        if _selects(monitor["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])
        and endpoint["port"] in {p["name"] for p in s["spec"]["ports"]}
    ]
    routers = [
        d
        for d in find(docs, "Deployment")
        if d["metadata"]["labels"]["app.kubernetes.io/component"] == "router"
    ]
    assert len(routers) == 2
    scraped_names = set()
    for router in routers:
        pod_labels = router["spec"]["template"]["metadata"]["labels"]
        through = [s for s in selected if _selects(s["spec"]["selector"], pod_labels)]
        assert len(through) == 1, (router["metadata"]["name"], [s["metadata"]["name"] for s in through])
        assert through[0]["spec"].get("type", "ClusterIP") == "ClusterIP"
        scraped_names.add(through[0]["metadata"]["name"])
        if service_type == "ClusterIP":  # unchanged for existing releases: the router Service itself
            assert through[0]["metadata"]["name"] == router["metadata"]["name"]
    assert len(selected) == 2
    [rule] = [
        r
        for r in find(docs, "PrometheusRule")[0]["spec"]["groups"][0]["rules"]
        if r["alert"] == "KVTierRouterNoHealthyWorkers"
    ]
    matched = rule["expr"].split("service=~`", 1)[1].split("`", 1)[0]
    assert set(matched.split("|")) == scraped_names


def test_load_balancer_fields_render_only_on_a_load_balancer(tmp_path: Path) -> None:
    """The API server refuses spec.loadBalancerClass on any other type."""
    values = {"router": {"service": {"type": "NodePort", "loadBalancerClass": "service.k8s.aws/nlb"}}}
    service = _router_service(render_docs(CHART, values=[CPU, _file(tmp_path, values)]))
    assert service["spec"]["type"] == "NodePort" and "loadBalancerClass" not in service["spec"]


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("router.service.type", "ExternalName", "/router/service/type"),
        (
            "router.service.loadBalancerSourceRanges",
            ["anywhere"],
            "/router/service/loadBalancerSourceRanges/0",
        ),
        ("router.ingress.hosts", {"Not_A_Model": ["a.example"]}, "invalid propertyName 'Not_A_Model'"),
        ("router.ingress.port", 80, "/router/ingress"),
        ("router.httpRoute.parentRefs", [{"namespace": "infra"}], "/router/httpRoute/parentRefs/0"),
        ("networkPolicy.exposedFrom", [{}], "/networkPolicy/exposedFrom/0"),
    ],
)
def test_the_schema_stays_strict(key: str, value: Any, words: str, tmp_path: Path) -> None:
    done = render(CHART, values=[CPU], extra=["--set-json", f"{key}={json.dumps(value)}"])
    assert done.returncode != 0, f"Helm rendered {key}={value!r}"
    assert "values don't meet the specifications of the schema" in done.stderr and words in done.stderr


ROUTER_PORT = 8080
CLIENT_IS_STRANGER = [{"podSelector": {"matchLabels": {"app": "stranger"}}}]
PROMETHEUS_NAMESPACE = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
LIVESIM_CONTROLLER = [{"namespaceSelector": {"matchLabels": {"name": LIVESIM_INGRESS_NAMESPACE}}}]
ANY_HOST_INGRESS = {"router": {"ingress": {"enabled": True, "hosts": {MODEL: []}}}}


def _net(tmp_path: Path, name: str, values: dict[str, Any]):
    done = render(CHART, values=[CPU, _file(tmp_path, values)])
    assert done.returncode == 0, done.stderr
    return connectivity(done.stdout, NAMESPACE, tmp_path / name)


@pytest.mark.parametrize(
    "way_in",
    [
        {"router": {"service": {"type": "LoadBalancer", "annotations": INTERNAL}}},
        {"router": {"service": {"type": "NodePort"}}},
        {
            "router": {
                "httpRoute": {"enabled": True, "parentRefs": [{"name": "gw"}], "hostnames": {MODEL: []}}
            }
        },
    ],
    ids=["load balancer", "node port", "http route"],
)
def test_the_network_policy_admits_exposed_from_only_while_a_way_in_is_on(
    way_in: dict[str, Any], tmp_path: Path, need
) -> None:
    """nca (tests/charts/netpol.py) judges; the `monitoring` bystander namespace plays the way in."""
    need(not missing(), missing())
    policy = {"networkPolicy": {"clientsFrom": CLIENT_IS_STRANGER, "exposedFrom": PROMETHEUS_NAMESPACE}}
    before = _net(tmp_path, "closed", policy)
    assert before.tcp("prometheus", "router") == set()
    assert before.tcp("stranger", "router") == {ROUTER_PORT}
    after = _net(tmp_path, "opened", {**policy, **way_in})
    assert after.tcp("prometheus", "router") == {ROUTER_PORT}
    assert after.tcp("stranger", "router") == {ROUTER_PORT}
    assert after.tcp("test", "router") == {ROUTER_PORT}
    assert after.ports("outside", "router") == set()
    assert after.ports("prometheus", "engine") == set()


def test_the_ingress_controller_reaches_the_router_once_named(tmp_path: Path, need) -> None:
    """With an Ingress in the resources, nca simulates an ingress controller (its LiveSim): it reaches the
    router while clientsFrom is empty, is shut out once clientsFrom names other peers (what
    router-exposure-networkpolicy warns of), and is let in again by networkPolicy.exposedFrom."""
    need(not missing(), missing())
    open_door = _net(tmp_path, "any", ANY_HOST_INGRESS)
    assert open_door.tcp("ingress-controller", "router") == {ROUTER_PORT}
    restricted = {**ANY_HOST_INGRESS, "networkPolicy": {"clientsFrom": CLIENT_IS_STRANGER}}
    shut = _net(tmp_path, "shut", restricted)
    assert shut.tcp("ingress-controller", "router") == set()
    restricted["networkPolicy"]["exposedFrom"] = LIVESIM_CONTROLLER
    named = _net(tmp_path, "named", restricted)
    assert named.tcp("ingress-controller", "router") == {ROUTER_PORT}
    assert named.ports("ingress-controller", "engine") == set()
    assert named.ports("outside", "router") == set()


def _validate(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["validate", "--output", "json", "--helm", "3", str(path)])
    [env] = json.loads(capsys.readouterr().out)["environments"]
    return code, env


def test_validate_refuses_an_exposed_router_without_a_key_and_passes_an_internal_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """values/cpu.yaml with a LoadBalancer: the schema takes it, the rule judges it at the user's line."""
    base = yaml.safe_load(CPU.read_text())
    exposed = tmp_path / "exposed.yaml"
    exposed.write_text(
        yaml.safe_dump(
            {**base, "router": {**base["router"], "service": {"type": "LoadBalancer"}}}, sort_keys=False
        )
    )
    code, env = _validate(exposed, capsys)
    assert code == 1
    assert not [f for f in env["findings"] if f["check"] == "schema"], env["findings"]
    [refusal] = [f for f in env["findings"] if f.get("rule") == "router-exposed-api-key"]
    assert refusal["severity"] == "error" and refusal["path"] == "router.service.type" and refusal["line"]
    assert "auth.apiKeySecret.name" in refusal["message"]

    internal = tmp_path / "internal.yaml"
    router = {**base["router"], "service": {"type": "LoadBalancer", "annotations": INTERNAL}}
    internal.write_text(yaml.safe_dump({**base, "router": router, **KEY}, sort_keys=False))
    code, env = _validate(internal, capsys)
    judged = [f for f in env["findings"] if str(f.get("rule", "")).startswith("router-expos")]
    assert judged == [] and not [f for f in env["findings"] if f["check"] == "schema"]
    assert code == 0, [f for f in env["findings"] if f.get("severity") == "error"]


def _ingress_tls_findings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ingress: dict[str, Any], key: bool = True
) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]]]:
    """`kvtier validate` on values/cpu.yaml with router.ingress `ingress` (and the API key): its exit
    code, the router-ingress-tls findings and the router-exposed-api-key ones."""
    base = yaml.safe_load(CPU.read_text())
    router = {**base["router"], "ingress": {"enabled": True, **ingress}}
    path = tmp_path / "ingress.yaml"
    path.write_text(yaml.safe_dump({**base, "router": router, **(KEY if key else {})}, sort_keys=False))
    code, env = _validate(path, capsys)
    found = env["findings"]
    assert not [f for f in found if f["check"] == "schema"], found
    return (
        code,
        [f for f in found if f.get("rule") == "router-ingress-tls"],
        [f for f in found if f.get("rule") == "router-exposed-api-key"],
    )


ALB_CERT = {"alb.ingress.kubernetes.io/certificate-arn": "arn:aws:acm:us-east-1:1:certificate/x"}
INGRESS_TLS_CASES = {
    # (router.ingress, {rendered rule host: severity} of router-ingress-tls)
    "a wildcard covers one label, not two": (
        {
            "hosts": {MODEL: ["llm.example.com", "a.b.example.com"]},
            "tls": [{"secretName": "wildcard-tls", "hosts": ["*.example.com"]}],
        },
        {"a.b.example.com": "error"},
    ),
    "a named host covered, another not": (
        {
            "hosts": {MODEL: ["llm.example.com", "api.example.com"]},
            "tls": [{"secretName": "llm-tls", "hosts": ["llm.example.com"]}],
        },
        {"api.example.com": "error"},
    ),
    "the tls is another model's host": (
        {
            "hosts": {MODEL: ["llm.example.com"]},
            "tls": [{"secretName": "other-tls", "hosts": ["other.example.com"]}],
        },
        {"llm.example.com": "error"},
    ),
    "any host with named tls only": (
        {"hosts": {MODEL: []}, "tls": [{"secretName": "llm-tls", "hosts": ["llm.example.com"]}]},
        {"": "error"},
    ),
    "tls from an ALB annotation": (
        {
            "hosts": {MODEL: ["llm.example.com"]},
            "annotations": ALB_CERT,
        },
        {"llm.example.com": "warning"},
    ),
}


@pytest.mark.parametrize(("ingress", "judged"), INGRESS_TLS_CASES.values(), ids=INGRESS_TLS_CASES.keys())
def test_validate_judges_ingress_tls_on_the_render(
    ingress: dict[str, Any], judged: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whatever router.ingress.tls looks like, each rendered rule host without a covering spec.tls entry
    is reported with the key on: an error naming the Ingress, the host and the fix, a warning where a
    controller annotation supplies the certificate."""
    code, tls, _ = _ingress_tls_findings(tmp_path, capsys, ingress)
    values = {"router": {"ingress": {"enabled": True, **ingress}}}
    [rendered] = find(render_docs(CHART, values=[CPU, _file(tmp_path, values)]), "Ingress")
    hosts = [r.get("host", "") for r in rendered["spec"]["rules"]]
    assert {hosts[int(f["path"].split("[")[1].rstrip("]"))]: f["severity"] for f in tls} == judged
    for f in tls:
        assert f["subject"] == f"Ingress/kvtier-kv-tiered-inference-{MODEL}-router"  # validate's release
        if f["severity"] == "error":
            assert "router.ingress.tls" in f["message"] or "router.ingress.hosts" in f["message"]
    assert code == (1 if "error" in judged.values() else 0)


def test_validate_passes_an_any_host_ingress_covered_by_a_tls_entry_without_hosts_and_only_then(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    covered = {"hosts": {MODEL: []}, "tls": [{"secretName": "default-tls"}]}
    code, tls, _ = _ingress_tls_findings(tmp_path, capsys, covered)
    assert tls == [] and code == 0
    code, tls, _ = _ingress_tls_findings(tmp_path, capsys, {"hosts": {MODEL: []}})
    assert [(f["path"], f["severity"]) for f in tls] == [("spec.rules[0]", "error")] and code == 1


def test_validate_without_an_api_key_keeps_the_exposure_error_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No key: router-exposed-api-key refuses the Ingress and router-ingress-tls stays silent; with the key
    the same bare host is router-ingress-tls's error."""
    bare = {"hosts": {MODEL: ["llm.example.com"]}}
    code, tls, keyless = _ingress_tls_findings(tmp_path, capsys, bare, key=False)
    assert tls == [] and [f["severity"] for f in keyless] == ["error"] and code == 1
    code, tls, keyless = _ingress_tls_findings(tmp_path, capsys, bare)
    assert [f["severity"] for f in tls] == ["error"] and keyless == [] and code == 1
