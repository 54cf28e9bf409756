"""kvtier.validate.inputs.provenance: a refused rendered field, or a chart's refusal, traced to the values key
and the user's line that produced it (the user's -f overlay included, not only the environment file)."""

from __future__ import annotations

from pathlib import Path

from kvtier.validate.findings import Finding
from kvtier.validate.inputs import loader, merge, provenance
from kvtier.validate.inputs.origins import Origins

VALUES = {
    "router": {
        "affinity": {"podAntiAffinity": {"preferred": [{"weight": 1, "term": {"labelSelector": {}}}]}}
    },
    "networkPolicy": {"metricsFrom": [{"ipBlock": {"cidr": "10.0.0.0/8"}, "namespaceSelector": {}}]},
    "curvine": {"worker": {"securityContext": {"privileged": True, "runAsUser": 0}}},
    "models": [{"name": "qwen", "source": {"huggingface": {"revision": "f2826a0"}}}],
}


def test_a_whole_mapping_the_chart_copied_is_found_at_its_deepest_equal_node() -> None:
    manifest = {"spec": {"template": {"spec": {"affinity": VALUES["router"]["affinity"]}}}}
    field = "spec.template.spec.affinity.podAntiAffinity.preferred[0].term.topologyKey"
    key = provenance.trace(field, "Required value", manifest, VALUES)
    assert key == ("router", "affinity", "podAntiAffinity", "preferred", 0, "term")


def test_a_list_item_copied_into_another_list_is_found() -> None:
    peer = VALUES["networkPolicy"]["metricsFrom"][0]
    manifest = {"spec": {"ingress": [{"from": [{"podSelector": {}}]}, {"from": [peer]}]}}
    key = provenance.trace("spec.ingress[1].from[0]", "Forbidden: may not specify both", manifest, VALUES)
    assert key == ("networkPolicy", "metricsFrom", 0)


def test_a_mapping_the_chart_extended_is_found_by_its_values_keys() -> None:
    context = {
        "privileged": True,
        "runAsUser": 0,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
    }
    manifest = {"spec": {"template": {"spec": {"containers": [{"securityContext": context}]}}}}
    key = provenance.trace(
        "spec.template.spec.containers[0].securityContext", "Invalid value", manifest, VALUES
    )
    assert key == ("curvine", "worker", "securityContext")


def test_a_container_named_in_brackets_is_the_item_of_that_name() -> None:
    """The rules on rendered objects name containers (`containers[router]`), not index them."""
    values = {"router": {"extraArgs": ["--port", "9000"]}}
    router = {"name": "router", "args": ["--host", "0.0.0.0", "--port", "8080", "--port", "9000"]}
    manifest = {"spec": {"template": {"spec": {"containers": [{"name": "sidecar"}, router]}}}}
    field = "spec.template.spec.containers[router].args[4]"
    assert provenance.at(manifest, provenance.steps(field)) == "--port"
    assert provenance.trace(field, "overrides the chart's --port", manifest, values) == (
        "router",
        "extraArgs",
        0,
    )
    assert provenance.at(manifest, provenance.steps("spec.template.spec.containers[absent].args")) is None


def test_nothing_is_claimed_for_a_field_no_value_produced() -> None:
    manifest = {"metadata": {"name": "x_y"}, "spec": {"replicas": 7}}
    assert provenance.trace("metadata.name", 'Invalid value: "x_y"', manifest, VALUES) is None


def test_a_refusal_naming_a_model_by_name_is_the_models_index() -> None:
    message = "models[qwen].source.huggingface.revision: a pinned revision is a full 40-character commit"
    assert provenance.named_key(message, VALUES) == ("models", 0, "source", "huggingface", "revision")
    assert provenance.named_key("at <.Values.curvine.worker.securityContext>: bad", VALUES) == (
        "curvine",
        "worker",
        "securityContext",
    )
    assert provenance.named_key("kv-tiered-inference/templates/x.yaml:3: e.g. nothing", VALUES) is None


def test_a_template_error_after_a_user_null_points_at_the_null(tmp_path: Path) -> None:
    chart = merge.Chart("c", "c", {"hyperpod": {"operator": {"version": "3.7.0"}}, "other": {"x": None}})
    user = tmp_path / "over.yaml"
    user.write_text("other:\n  x: null\nhyperpod:\n  operator:\n    version: null\n")
    origins = Origins([loader.load(user)], chart)
    assert provenance.nulled_defaults(origins) == [("hyperpod", "operator", "version")]
    refusal = Finding("render helm3", "render.error", "error calling semverCompare: invalid semantic version")
    moved = provenance.retarget_refusal(refusal, {"hyperpod": {"operator": {}}}, origins)
    assert (moved.file, moved.line, moved.path) == (str(user), 5, "hyperpod.operator.version")
    assert "null` deleted the chart's default" in moved.message
