"""The rig's router flags: taken from a rendered router Deployment, less what says where things are."""

from __future__ import annotations

import pytest

from kvtier import helm
from kvtier.engine_rig import router_flags
from kvtier.engine_rig.errors import RigError

RENDERED = """
apiVersion: v1
kind: Service
metadata: {name: rel-router}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: rel-kv-tiered-inference-m-router
  labels: {app.kubernetes.io/component: router}
spec:
  template:
    spec:
      containers:
        - name: router
          command: [vllm-router]
          args: [--host, 0.0.0.0, --port, "8080", --policy, cache_aware, --cache-threshold, "0.5",
                 --prometheus-port=29000, --service-discovery, --selector, a=b, c=d,
                 --service-discovery-namespace, ns, --service-discovery-port, "8000"]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: rel-engine, labels: {app.kubernetes.io/component: engine}}
spec: {template: {spec: {containers: [{name: vllm, args: [serve, m]}]}}}
"""
MANIFESTS = helm.split(RENDERED).manifests


def test_flags_from_the_router_deployment_only() -> None:
    flags = router_flags.flags_from_manifests(MANIFESTS)
    assert flags[:2] == ["--host", "0.0.0.0"] and "--policy" in flags


def test_strip_discovery_keeps_policy_and_tuning() -> None:
    kept = router_flags.strip_discovery(router_flags.flags_from_manifests(MANIFESTS))
    assert kept == ["--policy", "cache_aware", "--cache-threshold", "0.5"]


def test_no_router_deployment_is_an_error() -> None:
    with pytest.raises(RigError, match="found 0"):
        router_flags.flags_from_manifests([{"kind": "Service", "metadata": {"name": "x"}}])


def test_unknown_strategy_is_an_error() -> None:
    with pytest.raises(RigError, match="expected one of prefixaware"):
        router_flags.chart_flags("fastest")


def test_every_strategy_maps_to_a_router_policy() -> None:
    assert router_flags.STRATEGY_POLICY == {
        "prefixaware": "cache_aware",
        "kvaware": "kv_aware",
        "session": "consistent_hash",
        "roundrobin": "round_robin",
    }
