"""What `validate --context` looks up (kvtier.validate.checks.references.references): every Secret, ConfigMap
and claim a pod template reads, at the field that names it, less optional ones and what the
release renders."""

from __future__ import annotations

from kvtier.validate.checks import references


def _deployment(spec: dict) -> dict:
    return {"kind": "Deployment", "metadata": {"name": "e"}, "spec": {"template": {"spec": spec}}}


def test_each_source_is_found_at_its_field_with_the_keys_it_reads() -> None:
    container = {
        "name": "c",
        "envFrom": [{"secretRef": {"name": "s"}}, {"configMapRef": {"name": "opt", "optional": True}}],
        "env": [
            {"name": "A", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}},
            {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k", "optional": True}}},
            {"name": "C", "value": "plain"},
        ],
    }
    volumes = [
        {"name": "v", "persistentVolumeClaim": {"claimName": "l2"}},
        {"name": "w", "secret": {"secretName": "sv", "items": [{"key": "a", "path": "a"}]}},
        {"name": "x", "configMap": {"name": "mine"}},
    ]
    rendered_here = {"kind": "ConfigMap", "metadata": {"name": "mine"}}
    found = references.references(
        [_deployment({"containers": [container], "volumes": volumes}), rendered_here]
    )
    pod = "spec.template.spec"
    assert {(r.kind, r.name, r.key, r.path) for r in found} == {
        ("PersistentVolumeClaim", "l2", None, f"{pod}.volumes[0].persistentVolumeClaim.claimName"),
        ("Secret", "sv", "a", f"{pod}.volumes[1].secret.secretName"),
        ("Secret", "s", None, f"{pod}.containers[0].envFrom[0].secretRef.name"),
        ("Secret", "hf", "token", f"{pod}.containers[0].env[0].valueFrom.secretKeyRef.name"),
    }
    assert {r.subject for r in found} == {"Deployment/e"}


def test_a_pod_that_reads_nothing_from_the_namespace_has_no_references() -> None:
    assert references.references([_deployment({"containers": [{"name": "c", "image": "i"}]})]) == []
