"""Kubernetes schema layer: strict schemas per minor, cached, and CRDs/unserved APIs told apart."""

from __future__ import annotations

import copy

from kvtier.validate.findings import CURVINE, LMCACHE, UNAVAILABLE, Judged, NotRun
from kvtier.validate.layers import configs, kube

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "x"},
    "spec": {
        "selector": {"matchLabels": {"a": "b"}},
        "template": {
            "metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i:1"}]},
        },
    },
}


def test_valid_deployment_passes_every_default_minor() -> None:
    for minor in kube.DEFAULT_MINORS:
        assert kube.check(DEPLOYMENT, minor) == []


def test_strict_schema_rejects_unknown_field_with_its_path() -> None:
    bad = copy.deepcopy(DEPLOYMENT)
    bad["spec"]["template"]["spec"]["containers"][0]["imagePullPolice"] = "Always"
    [error] = kube.check(bad, "1.30") or []
    assert error.startswith("spec.template.spec.containers.0:") and "imagePullPolice" in error


def test_wrong_type_is_reported() -> None:
    bad = copy.deepcopy(DEPLOYMENT)
    bad["spec"]["replicas"] = "two"
    assert any("spec.replicas" in e for e in kube.check(bad, "1.35") or [])


def test_custom_resources_have_no_schema_and_are_not_builtin() -> None:
    crd = {"apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "InferenceEndpointConfig"}
    assert kube.check(crd, "1.30") is None
    assert not kube.builtin_group(crd["apiVersion"])


def test_builtin_api_missing_in_older_minors() -> None:
    api, kind = "admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy"
    assert kube.builtin_group(api) and kube.builtin_group("v1") and kube.builtin_group("apps/v1")
    assert kube.check({"apiVersion": api, "kind": kind}, "1.35") is None
    served = kube.served_in(api, kind)
    assert served and served[0] == "1.36"


def test_default_minors_are_shipped_by_kubernetes_validate() -> None:
    assert set(kube.DEFAULT_MINORS) <= set(kube.available_minors())


def test_a_missing_checker_is_not_available_never_passed(monkeypatch) -> None:
    manifests = [
        {"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"curvine-cluster.toml": "x = 1\n"}}
    ]
    monkeypatch.setitem(
        configs.CHECKERS, CURVINE, ("kvtier.no_such_module", ("check_text",), configs.CHECKERS[CURVINE][2])
    )
    outcome = configs.run(manifests, CURVINE, "env.yaml")
    assert isinstance(outcome, NotRun) and outcome.status == UNAVAILABLE and "missing" in outcome.why


def test_curvine_checker_finds_an_unknown_key() -> None:
    toml = "format_master = false\nformat_worker = false\n[master]\nweb_prot = 9000\n"
    manifests = [{"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"curvine-cluster.toml": toml}}]
    outcome = configs.run(manifests, CURVINE, "env.yaml")
    assert isinstance(outcome, Judged) and any("web_prot" in f.message for f in outcome.findings)
    assert all(f.subject == "ConfigMap/c:curvine-cluster.toml" for f in outcome.findings)


def test_lmcache_checker_finds_an_unknown_key(need) -> None:
    fn, why = configs.checker(LMCACHE)
    need(fn is not None, f"LMCache checker unavailable: {why}")
    manifests = [
        {
            "kind": "ConfigMap",
            "metadata": {"name": "c"},
            "data": {"lmcache.yaml": "chunk_size: 256\nchunk_sise: 512\n"},
        }
    ]
    outcome = configs.run(manifests, LMCACHE, "env.yaml")
    if isinstance(outcome, NotRun):
        need(False, f"LMCache loader not installed: {outcome.why}")
    assert isinstance(outcome, Judged) and any("chunk_sise" in f.message for f in outcome.findings)


def test_shared_verdicts_still_tell_minors_apart() -> None:
    """Verdicts are reused across minors only when the schema as the manifest sees it is the same:
    a PodSpec field added after 1.30 must fail at 1.30 and pass at 1.35 in the same run."""
    newer = copy.deepcopy(DEPLOYMENT)
    newer["spec"]["template"]["spec"]["hostnameOverride"] = "engine-0"
    assert kube.check(DEPLOYMENT, "1.30") == [] and kube.check(DEPLOYMENT, "1.35") == []
    assert any("hostnameOverride" in e for e in kube.check(newer, "1.30") or [])
    assert kube.check(newer, "1.35") == []


def test_minors_walked_together_project_as_each_alone() -> None:
    """The lockstep walk (one pass over the manifest for every minor) gives each minor exactly the
    projection a walk of its own would, so verdict sharing cannot leak between minors."""
    newer = copy.deepcopy(DEPLOYMENT)
    newer["spec"]["template"]["spec"]["hostnameOverride"] = "engine-0"

    def lane(minor: str) -> kube.Lane:
        schema = kube._schema(minor, "apps/v1", "Deployment")
        assert schema is not None
        return (schema.schema, kube._definitions(minor).get("$defs", {}), [])

    together = [lane(m) for m in kube.DEFAULT_MINORS]
    kube._projections(together, newer)
    for minor, (_, _, projection) in zip(kube.DEFAULT_MINORS, together, strict=True):
        alone = lane(minor)
        kube._projections([alone], newer)
        assert projection == alone[2], minor
    assert together[0][2] != together[-1][2]  # 1.30 lacks hostnameOverride, 1.35 has it


def test_all_minors_at_once_match_one_minor_at_a_time() -> None:
    newer = copy.deepcopy(DEPLOYMENT)
    newer["spec"]["template"]["spec"]["hostnameOverride"] = "engine-1"
    together = kube.check_minors(newer, kube.DEFAULT_MINORS)
    kube._results.clear()
    apart = {minor: kube.check(newer, minor) for minor in kube.DEFAULT_MINORS}
    assert together == apart
    assert together["1.30"] and together["1.35"] == []
