"""`kvtier validate --context`: the Secrets, ConfigMaps and claims the rendered pods read are looked up in
the release's namespace on the test cluster's real API server. A Secret that is missing, or lacks the key
a pod reads, is an error at the values key that names it (the staging environment's Hugging Face token);
once the Secret holds the key, the row passes."""

from __future__ import annotations

from pathlib import Path

import yaml

from kvtier import paths
from kvtier.cluster.common.rest import Rest
from kvtier.validate import pipeline
from kvtier.validate.checks.references import REFERENCES

STAGING = paths.VALUES / "staging.yaml"


def _context(kubeconfig: Path) -> str:
    return yaml.safe_load(kubeconfig.read_text())["current-context"]


def _reference_findings(kubeconfig: Path, namespace: str) -> tuple[pipeline.FileReport, list]:
    options = pipeline.Options(
        helm_majors=(3,),
        minors=("1.35",),
        namespace=namespace,
        kube_context=_context(kubeconfig),
        kubeconfig=str(kubeconfig),
    )
    [report] = pipeline.validate([STAGING], options)
    return report, [f for f in report.findings if f.check == REFERENCES]


def _secret(namespace: str, **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf-token"}, "stringData": data}


def test_a_missing_secret_and_a_missing_key_are_named_at_the_values_key(
    kube_cluster: Path, kube_rest: Rest, make_namespace
) -> None:
    namespace = make_namespace("refs", enforce="privileged")

    report, found = _reference_findings(kube_cluster, namespace)
    assert found, report.findings
    assert {f.severity for f in found} == {"error"}
    assert all("Secret 'hf-token' does not exist" in f.message for f in found), found
    assert {f.path for f in found} == {"models[0].source.huggingface.tokenSecret.name"}, found
    assert found[0].line and found[0].file.endswith("staging.yaml"), found[0]
    assert pipeline.exit_code([report]) == 1

    kube_rest.post(f"/api/v1/namespaces/{namespace}/secrets", _secret(namespace, other="x"))
    _, found = _reference_findings(kube_cluster, namespace)
    assert found and all("has no key 'token' (it has other)" in f.message for f in found), found

    kube_rest.delete(f"/api/v1/namespaces/{namespace}/secrets/hf-token")
    kube_rest.post(f"/api/v1/namespaces/{namespace}/secrets", _secret(namespace, token="hf_x"))
    report, found = _reference_findings(kube_cluster, namespace)
    assert not found, found
    assert report.checks[REFERENCES].status == "ok", report.checks[REFERENCES]
    assert "in " + namespace in report.checks[REFERENCES].detail
