"""Installing CustomResourceDefinitions on the test API server, and the upstream ones the charts use.

KEDA's (the engine ScaledObjects), the Prometheus Operator's (PrometheusRule, ServiceMonitor, PodMonitor)
and Gateway API's standard channel (the router HTTPRoutes) come as files of their Go modules at the versions
pinned in toolchain/versions.env; no controller of theirs runs: the API server validates the objects against
the CRDs' schemas.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kvtier import waiting
from kvtier.cluster.common.rest import Rest
from kvtier.upstream import go_module

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
KEDA_FILES = ("keda.sh_scaledobjects.yaml", "keda.sh_triggerauthentications.yaml")
PROMETHEUS_OPERATOR_FILES = (
    "monitoring.coreos.com_prometheusrules.yaml",
    "monitoring.coreos.com_servicemonitors.yaml",
    "monitoring.coreos.com_podmonitors.yaml",
)


def _load(folder: Path, names: tuple[str, ...]) -> list[dict[str, Any]]:
    return [yaml.safe_load((folder / name).read_text()) for name in names]


def keda() -> list[dict[str, Any]]:
    folder = go_module.module_dir("github.com/kedacore/keda/v2", "KEDA_VERSION") / "config" / "crd" / "bases"
    return _load(folder, KEDA_FILES)


def prometheus_operator() -> list[dict[str, Any]]:
    module = go_module.module_dir(
        "github.com/prometheus-operator/prometheus-operator", "PROMETHEUS_OPERATOR_VERSION"
    )
    return _load(module / "example" / "prometheus-operator-crd", PROMETHEUS_OPERATOR_FILES)


def gateway_api() -> list[dict[str, Any]]:
    """Every CRD of Gateway API's standard channel (its folder also holds a ValidatingAdmissionPolicy that
    guards upgrades: not a CRD, left out)."""
    module = go_module.module_dir("sigs.k8s.io/gateway-api", "GATEWAY_API_VERSION")
    found = []
    for file in sorted((module / "config" / "crd" / "standard").glob("*.yaml")):
        docs = yaml.safe_load_all(file.read_text())
        found += [d for d in docs if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"]
    return found


def operators() -> list[dict[str, Any]]:
    """Every set: what environments with engine autoscaling, monitors, alerts or router HTTPRoutes need
    (validate's local control plane installs them all)."""
    return [*keda(), *prometheus_operator(), *gateway_api()]


def install(rest: Rest, crds: list[dict[str, Any]], timeout: float = 60) -> list[str]:
    """Create (or replace) the CRDs and wait until the API server serves them; their names."""
    names = []
    for crd in crds:
        name = crd["metadata"]["name"]
        names.append(name)
        current = rest.find(f"{CRD_PATH}/{name}")
        if current is None:
            rest.post(CRD_PATH, crd)
        else:
            crd = {
                **crd,
                "metadata": {**crd["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]},
            }
            rest.put(f"{CRD_PATH}/{name}", crd)
    waiting.wait_until(
        lambda: all(_established(rest, name) for name in names),
        deadline=waiting.deadline_in(timeout),
        fail=lambda _: TimeoutError(f"CRDs not Established after {timeout:.0f}s: {names}"),
    )
    return names


def _established(rest: Rest, name: str) -> bool:
    conditions = rest.get(f"{CRD_PATH}/{name}").get("status", {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)
