"""The umbrella's manifests (Curvine included) against the strict Kubernetes schemas of 1.30 to 1.35
(PyPI kubernetes-validate): defaults, every values/ environment, every ci/ scenario, Helm 3 and 4."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from render import helm_bin, render_docs

from kvtier import helm, paths
from kvtier.validate.layers import kube

CHART = paths.CHARTS / "kv-tiered-inference"
MINORS = ("1.30", "1.31", "1.32", "1.33", "1.34", "1.35")
CASES = [None, *sorted(paths.VALUES.glob("*.yaml")), *sorted((CHART / "ci").glob("*-values.yaml"))]
# Custom resources have no schema in kubernetes-validate (the hyperpod suites check theirs on an API server).
CUSTOM_KINDS = {
    "ServiceMonitor", "PodMonitor", "PrometheusRule", "ScaledObject", "InferenceEndpointConfig", "Policy",
}  # fmt: skip


def render_args(values: Path | None) -> dict:
    spec = yaml.safe_load(values.read_text()) if values else {}
    # hyperpod environments need the MutatingAdmissionPolicy version that helm template cannot ask for.
    extra = (
        {"hyperpod.patch.apiVersion": "admissionregistration.k8s.io/v1beta1"}
        if spec.get("target") == "hyperpod"
        else {}
    )
    return {"values": [values] if values else [], "set_values": extra}


@pytest.mark.parametrize("major", [3, 4])
@pytest.mark.parametrize("values", CASES, ids=lambda p: p.name if p else "defaults")
def test_strict_schemas_1_30_to_1_35(values: Path | None, major: int, need) -> None:
    need(helm_bin(major).exists(), f"pinned Helm {major} not built (make tools)")
    helm.build_dependencies(CHART)
    docs = render_docs(CHART, major=major, **render_args(values))
    problems, unchecked = [], set()
    for doc in docs:
        name = f"{doc['kind']}/{doc['metadata']['name']}"
        for minor in MINORS:
            errors = kube.check(doc, minor)
            if errors is None:
                # No schema at this version: only custom resources (and MAP before it is served).
                if kube.builtin_group(doc["apiVersion"]) and doc["kind"] not in {
                    "MutatingAdmissionPolicy",
                    "MutatingAdmissionPolicyBinding",
                }:
                    problems.append(f"{name}: {doc['apiVersion']} has no schema in Kubernetes {minor}")
                unchecked.add(doc["kind"])
                continue
            problems.extend(f"{name} @{minor}: {e}" for e in errors)
    assert not problems, "\n".join(problems[:40])
    assert unchecked <= CUSTOM_KINDS | {"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}
