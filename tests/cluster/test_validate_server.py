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


def _storage_class(name: str, provisioner: str) -> dict:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
    }


def _class_findings(reports: list[pipeline.FileReport]) -> list[list]:
    return [[f for f in r.findings if f.rule == "l2-storageclass-gives-rwx"] for r in reports]


def test_the_l2_class_is_judged_by_the_provisioner_the_cluster_serves(
    kube_cluster: Path, kube_rest: Rest, make_namespace, tmp_path: Path
) -> None:
    """l2-storageclass-gives-rwx reads the class on the judging API server (--server) and on --context's
    cluster: a `gp2` whose provisioner is EFS gives the ReadWriteMany claim whatever its name says, a `fast`
    of EBS cannot (an error). A class a control plane of validate's own lacks is judged by its name alone
    (a warning that says it was not found there); one the release's cluster lacks is a warning that the
    claim would wait for it."""
    namespace = make_namespace("judged-class", enforce="privileged")
    judge = server.local_judge(kube_rest, namespace, {}, "the test cluster")
    served = {"gp2": "efs.csi.aws.com", "fast": "ebs.csi.aws.com"}
    path = "/apis/storage.k8s.io/v1/storageclasses"
    files = []
    for name in (*served, "gp3"):
        values = {"curvine": {"enabled": False}, "cache": {"l2": {"claim": {"storageClassName": name}}}}
        files.append(_write(tmp_path, f"{name}.yaml", values))
    base = paths.VALUES / "prod-g6e-4xlarge.yaml"
    options = dataclasses.replace(OPTIONS, namespace=namespace)
    context = yaml.safe_load(kube_cluster.read_text())["current-context"]
    # The values layers alone, with the cluster layer's reader (--context): no render needed.
    on_context = dataclasses.replace(
        options, render=False, kube_context=context, kubeconfig=str(kube_cluster)
    )
    for name in served:  # the cluster is the session's: a class left by an interrupted run is replaced
        if kube_rest.find(f"{path}/{name}") is not None:
            kube_rest.delete(f"{path}/{name}")
    try:
        for name, provisioner in served.items():
            kube_rest.post(path, _storage_class(name, provisioner))
        by_server = [
            pipeline.validate([base], dataclasses.replace(options, values=(f,)), judge=judge)[0]
            for f in files
        ]
        by_context = [
            pipeline.validate([base], dataclasses.replace(on_context, values=(f,)))[0] for f in files
        ]
    finally:
        for name in served:
            kube_rest.delete(f"{path}/{name}")
    gp2, fast, gp3 = _class_findings(by_server)
    assert gp2 == [], gp2
    assert [f.severity for f in fast] == ["error"], fast
    assert "'fast' is, on the test cluster" in fast[0].message and "ebs.csi.aws.com" in fast[0].message
    assert fast[0].path == "cache.l2.claim.storageClassName" and fast[0].file.endswith("fast.yaml"), fast
    assert pipeline.exit_code([by_server[1]]) == 1
    assert [f.severity for f in gp3] == ["warning"], gp3
    assert "no StorageClass 'gp3' on the test cluster" in gp3[0].message, gp3
    assert "a class of ebs.csi.aws.com" in gp3[0].message, gp3  # its name's convention, said as such
    gp2, fast, gp3 = _class_findings(by_context)
    assert gp2 == [], gp2
    assert [f.severity for f in fast] == ["error"], fast
    assert f"'fast' is, on context {context}, a StorageClass of ebs.csi.aws.com" in fast[0].message
    assert [f.severity for f in gp3] == ["warning"], gp3
    assert f"no StorageClass of that name on context {context}, so the L2 claim stays Pending" in (
        gp3[0].message
    )
