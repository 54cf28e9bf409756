"""The router's ways in, judged by the real API server: Gateway API's standard-channel CRDs (its Go module at
GATEWAY_API_VERSION, toolchain/versions.env; kvtier.cluster.common.crds.gateway_api) installed on the test
cluster, the chart rendered with router.httpRoute, router.ingress and a LoadBalancer Service, and each way-in
object sent to a server-side dry run with strict field validation (validate's server layer, Judge). Dry
runs persist nothing: no LoadBalancer Service is created and none is pointed at any address (docs/cluster.md
"Network rule")."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
import yaml

from kvtier import helm, paths
from kvtier.cluster.common import crds, discovery
from kvtier.cluster.common.rest import Rest
from kvtier.validate.layers import server

CHART = paths.CHARTS / "kv-tiered-inference"
MODEL = "qwen2-05b"  # values/cpu.yaml's model
WAY_IN = {
    "auth": {"apiKeySecret": {"name": "kv-key"}},
    "router": {
        "service": {
            "type": "LoadBalancer",
            "annotations": {"service.beta.kubernetes.io/aws-load-balancer-scheme": "internal"},
            "loadBalancerClass": "service.k8s.aws/nlb",
            "loadBalancerSourceRanges": ["10.0.0.0/8"],
        },
        "ingress": {
            "enabled": True,
            "className": "nginx",
            "hosts": {MODEL: ["llm.example.com"]},
            "tls": [{"secretName": "llm-tls", "hosts": ["llm.example.com"]}],
        },
        "httpRoute": {
            "enabled": True,
            "parentRefs": [{"name": "gw", "namespace": "infra", "sectionName": "https", "port": 443}],
            "hostnames": {MODEL: ["llm.example.com"]},
            "paths": [{"type": "PathPrefix", "value": "/v1"}, {"type": "Exact", "value": "/health"}],
        },
    },
    "networkPolicy": {
        "clientsFrom": [{"podSelector": {"matchLabels": {"app": "client"}}}],
        "exposedFrom": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "infra"}}}],
    },
}
JUDGED = {"Service", "Ingress", "HTTPRoute", "NetworkPolicy"}


@pytest.fixture(scope="module")
def gateway_api_crds(kube_rest: Rest, need) -> list[str]:
    need(shutil.which("go") is not None, "Go is needed to fetch Gateway API's CRDs from its Go module")
    return crds.install(kube_rest, crds.gateway_api())


def _rendered(tmp_path: Path, rest: Rest, namespace: str) -> list[dict]:
    overlay = tmp_path / "way-in.yaml"
    overlay.write_text(yaml.safe_dump(WAY_IN, sort_keys=False))
    helm.build_dependencies(CHART)
    rendered = helm.Template(
        CHART,
        "expose",
        [paths.VALUES / "cpu.yaml", overlay],
        namespace=namespace,
        kube_version=rest.get("/version")["gitVersion"],
        api_versions=discovery.api_versions_for_helm(rest),
    ).render()
    return [d for d in rendered.manifests if d.get("kind") in JUDGED]


def test_the_api_server_admits_every_way_in_and_refuses_a_broken_route(
    gateway_api_crds: list[str], kube_rest: Rest, make_namespace, tmp_path: Path, need
) -> None:
    need((paths.TOOLS_BIN / "helm3").exists(), "pinned Helm 3 not built (make tools)")
    assert "httproutes.gateway.networking.k8s.io" in gateway_api_crds
    namespace = make_namespace("expose")
    objects = _rendered(tmp_path, kube_rest, namespace)
    kinds = sorted({o["kind"] for o in objects})
    assert kinds == sorted(JUDGED), kinds
    judge = server.Judge(kube_rest, namespace, "the test cluster", local=True)
    refused = {f"{o['kind']}/{o['metadata']['name']}": judge.apply(o) for o in objects}
    assert {name: status for name, status in refused.items() if status is not None} == {}

    # The same judge refuses what Gateway API's CRD rules refuse: a path match that is not absolute.
    [route] = [o for o in objects if o["kind"] == "HTTPRoute"]
    broken = copy.deepcopy(route)
    broken["spec"]["rules"][0]["matches"][0]["path"]["value"] = "v1"
    status = judge.apply(broken)
    assert status is not None and "absolute path" in str(status.get("message")), status
