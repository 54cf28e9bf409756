"""The values rules beside the charts' NetworkPolicies, tenant isolation and API keys: a monitor the policies
keep Prometheus away from, host-network workers without node ranges, and what the HyperPod target cannot
give (tenant isolation with the operator's InProcess connector, an API key Secret)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kvtier import paths
from kvtier.validate import catalogue
from kvtier.validate.inputs import loader
from kvtier.validate.inputs.origins import Origins
from kvtier.validate.rules import ValuesContext

SCRAPER = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]


def _only(rule_id: str, values: dict[str, Any]) -> list[Any]:
    loaded = loader.load_text(yaml.safe_dump(values, sort_keys=False), Path("env.yaml"))
    return catalogue.run_values(ValuesContext(loaded.data, loaded, origins=Origins([loaded])), only=[rule_id])


def _run(values: dict[str, Any]) -> list[Any]:
    return _only("networkpolicy-metrics-scraper", values)


@pytest.mark.parametrize("monitor", ["podMonitor", "serviceMonitor"])
def test_a_monitor_without_an_admitted_scraper_is_a_warning(monitor: str) -> None:
    [finding] = _run({"metrics": {monitor: {"enabled": True}}})
    assert finding.severity == "warning" and finding.path == "networkPolicy"
    assert f"metrics.{monitor} on" in finding.message and "networkPolicy.metricsFrom" in finding.suggestion


@pytest.mark.parametrize(
    "values",
    [
        {"metrics": {"podMonitor": {"enabled": True}}, "networkPolicy": {"metricsFrom": SCRAPER}},
        {"metrics": {"podMonitor": {"enabled": True}}, "networkPolicy": {"enabled": False}},
        {"metrics": {"podMonitor": {"enabled": False}}},
        {"curvine": {"serviceMonitor": {"enabled": True}, "networkPolicy": {"metricsFrom": SCRAPER}}},
        {"curvine": {"enabled": False, "serviceMonitor": {"enabled": True}}},
    ],
)
def test_an_admitted_scraper_or_no_policies_or_no_monitor_pass(values: dict[str, Any]) -> None:
    assert _run(values) == []


def test_curvines_monitor_is_checked_against_curvines_policies() -> None:
    [finding] = _run({"curvine": {"serviceMonitor": {"enabled": True}}})
    assert finding.path == "curvine.networkPolicy" and "curvine.serviceMonitor on" in finding.message


def test_every_environment_with_monitors_admits_its_scraper() -> None:
    for file in sorted((paths.ROOT / "values").glob("*.yaml")):
        loaded = loader.load(file)
        context = ValuesContext(loaded.data, loaded, origins=Origins([loaded]))
        assert catalogue.run_values(context, only=["networkpolicy-metrics-scraper"]) == [], file.name


def test_host_network_workers_need_the_node_ranges() -> None:
    host = {"curvine": {"worker": {"hostNetwork": True}}}
    [finding] = _only("networkpolicy-node-cidrs", host)
    assert finding.path == "curvine.worker.hostNetwork" and "nodeCIDRs" in finding.suggestion
    ranged = {"curvine": {"worker": {"hostNetwork": True}, "networkPolicy": {"nodeCIDRs": ["10.0.0.0/8"]}}}
    assert _only("networkpolicy-node-cidrs", ranged) == []
    off = {"curvine": {"worker": {"hostNetwork": True}, "networkPolicy": {"enabled": False}}}
    assert _only("networkpolicy-node-cidrs", off) == []


@pytest.mark.parametrize(
    ("values", "refused"),
    [
        ({"target": "hyperpod", "cache": {"tenantIsolation": True, "l2": {"enabled": True}}}, True),
        ({"target": "hyperpod", "cache": {"tenantIsolation": False, "l2": {"enabled": True}}}, False),
        (
            {
                "target": "hyperpod",
                "cache": {"tenantIsolation": True, "l2": {"enabled": True}},
                "hyperpod": {"lmcache": {"mode": "MultiProcess"}},
            },
            False,
        ),
        ({"target": "standalone", "cache": {"tenantIsolation": True, "l2": {"enabled": True}}}, False),
        ({"target": "hyperpod", "cache": {"tenantIsolation": True, "l1": {"enabled": False}}}, False),
    ],
)
def test_tenant_isolation_is_refused_where_the_operators_connector_cannot_give_it(
    values: dict[str, Any], refused: bool
) -> None:
    findings = _only("hyperpod-tenant-isolation", values)
    assert [f.path for f in findings] == (["cache.tenantIsolation"] if refused else [])


def test_an_api_key_secret_is_refused_on_the_hyperpod_target() -> None:
    on_hyperpod = {"target": "hyperpod", "auth": {"apiKeySecret": {"name": "kv-key"}}}
    assert [f.path for f in _only("hyperpod-api-key", on_hyperpod)] == ["auth.apiKeySecret.name"]
    assert _only("hyperpod-api-key", {**on_hyperpod, "target": "standalone"}) == []
