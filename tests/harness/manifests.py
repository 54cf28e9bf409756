"""Rendered objects for the manifest rules' unit tests: a workload around a pod spec, and one rule run over
objects as `kvtier validate` runs it on a render."""

from __future__ import annotations

from typing import Any

from kvtier.validate import catalogue
from kvtier.validate.findings import Finding
from kvtier.validate.rules import ManifestsContext


def workload(pod: dict[str, Any], name: str = "e", kind: str = "Deployment") -> dict[str, Any]:
    """An apps/v1 `kind` named `name` whose pod template's spec is `pod`."""
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"template": {"spec": pod}},
    }


def run_rule(rule_id: str, *manifests: dict[str, Any]) -> list[Finding]:
    """What rule `rule_id` finds in `manifests` of release "kv", read from env.yaml."""
    return catalogue.run_manifests(ManifestsContext(list(manifests), "kv"), "env.yaml", only=[rule_id])
