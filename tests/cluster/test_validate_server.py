"""`kvtier validate --server` on the test cluster's real API server: every environment and ci/ scenario
is accepted as rendered; an upgrade that changes an immutable field of an installed object is refused in
the API server's words; a namespace missing on a user's cluster is said, not passed over."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import yaml

from kvtier import paths
from kvtier.cluster.common.rest import Rest
from kvtier.validate import pipeline
from kvtier.validate.findings import OK, SERVER, WARNED
from kvtier.validate.layers import render, server

CI_SCENARIOS = sorted((paths.CHARTS / "kv-tiered-inference" / "ci").glob("*.yaml"))
OPTIONS = pipeline.Options(helm_majors=(3,), minors=("1.35",))


def test_every_environment_and_ci_scenario_passes_the_api_server(kube_rest: Rest, make_namespace) -> None:
    namespace = make_namespace("judged-envs", enforce="privileged")  # Curvine's node plugins need it
    judge = server.local_judge(kube_rest, namespace, {}, "the test cluster")
    files = [*sorted(paths.VALUES.glob("*.yaml")), *CI_SCENARIOS]
    options = dataclasses.replace(OPTIONS, namespace=namespace)
    for path, report in zip(files, pipeline.validate(files, options, judge=judge), strict=True):
        row = report.checks[SERVER]
        refused = [f for f in report.findings if f.check == SERVER and f.severity == "error"]
        assert row.status in (OK, WARNED) and not refused, (path, row, refused)
        assert "objects on the test cluster" in row.detail, row


def _write(tmp_path: Path, name: str, values: dict) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(values, sort_keys=False))
    return path


def test_an_upgrade_that_changes_an_immutable_field_is_refused(
    kube_rest: Rest, make_namespace, tmp_path: Path
) -> None:
    namespace = make_namespace("judged-upgrade", enforce="privileged")
    judge = server.local_judge(kube_rest, namespace, {}, "the test cluster")
    values = yaml.safe_load((paths.VALUES / "prod-g6e-4xlarge.yaml").read_text())
    installed = _write(tmp_path, "installed.yaml", values)
    bigger = copy.deepcopy(values)
    bigger.setdefault("curvine", {}).setdefault("master", {}).setdefault("persistence", {})["size"] = "20Gi"
    upgraded = _write(tmp_path, "upgraded.yaml", bigger)

    # "Install": the masters' StatefulSet as the release created it, for real.
    [rendered] = [
        f.result()
        for f in render.start([installed], (3,), OPTIONS.release, namespace, OPTIONS.kube_version, 1).pending[
            0
        ]
    ]
    [masters] = [
        m for m in rendered.manifests if m["kind"] == "StatefulSet" and "master" in m["metadata"]["name"]
    ]
    assert judge.apply(masters, dry_run=False) is None

    options = dataclasses.replace(OPTIONS, namespace=namespace)
    same, changed = pipeline.validate([installed, upgraded], options, judge=judge)
    assert not [f for f in same.findings if f.check == SERVER], same.findings
    refused = [
        f
        for f in changed.findings
        if f.check == SERVER and f.subject == f"StatefulSet/{masters['metadata']['name']}"
    ]
    assert refused, changed.findings
    assert "immutable" in refused[0].message or "Forbidden" in refused[0].message, refused[0]
    assert refused[0].message.startswith("spec") and len(refused[0].message) < 400, refused[0].message
    assert pipeline.exit_code([changed]) == 1


def test_a_namespace_missing_on_a_users_cluster_is_said(kube_rest: Rest) -> None:
    judge = server.Judge(kube_rest, "no-such-namespace", "context test")  # a user's cluster: writes nothing
    options = dataclasses.replace(OPTIONS, namespace="no-such-namespace")
    [report] = pipeline.validate([paths.VALUES / "cpu.yaml"], options, judge=judge)
    assert "namespace 'no-such-namespace' does not exist there" in report.checks[SERVER].detail
    assert kube_rest.find("/api/v1/namespaces/no-such-namespace") is None


def test_keda_and_prometheus_operator_objects_are_judged_by_their_real_crds(
    kube_rest: Rest, make_namespace, need
) -> None:
    """The local judge installs KEDA's and the Prometheus Operator's CRDs (their Go modules): the
    autoscaled environment's ScaledObject and PrometheusRule pass, and a misspelt or mistyped field in
    either is refused by the CRD's schema, not passed over."""
    namespace = make_namespace("judged-operators", enforce="privileged")
    judge = server.local_judge(kube_rest, namespace, {}, "the test cluster")
    need(judge.resource("keda.sh/v1alpha1", "ScaledObject") is not None, "KEDA's CRDs not installed (no Go?)")
    env = paths.VALUES / "prod-autoscaled-g6e-4xlarge.yaml"
    [rendered] = [
        f.result() for f in render.start([env], (3,), "kv", namespace, OPTIONS.kube_version, 1).pending[0]
    ]
    by_kind = {m["kind"]: m for m in rendered.manifests}
    scaled, rule = by_kind["ScaledObject"], by_kind["PrometheusRule"]
    assert judge.apply(scaled) is None and judge.apply(rule) is None
    misspelt = copy.deepcopy(scaled)
    misspelt["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behaviour"] = {}
    mistyped = copy.deepcopy(scaled)
    mistyped["spec"]["minReplicaCount"] = "two"
    bad_for = copy.deepcopy(rule)
    bad_for["spec"]["groups"][0]["rules"][0]["for"] = "fifteen minutes"
    for broken, words in ((misspelt, "behaviour"), (mistyped, "minReplicaCount"), (bad_for, "for")):
        status = judge.apply(broken)
        assert status is not None and words in status.get("message", ""), status
