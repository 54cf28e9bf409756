"""The operator CRDs derived from AWS's SDK (kvtier.upstream.hyperpod_crd): what they hold per operator
version, and how the comparison with a real CRD reports differences.

The derived CRDs are what every checkout's tests install and validate against. No test compares them with
the operator's real CRD: that copy lives outside the repository (tests may not read it), so such a test
could only ever skip. `hyperpod_crd.compare` does the comparison for anyone who has one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kvtier import paths
from kvtier.cluster.common import hyperpod
from kvtier.upstream import hyperpod_crd, hyperpod_fields, hyperpod_sdk


def spec_schema(crd: dict[str, Any]) -> dict[str, Any]:
    version = next(v for v in crd["spec"]["versions"] if v["name"] == hyperpod_fields.VERSION)
    return version["schema"]["openAPIV3Schema"]


def test_written_to_the_folder_given_never_into_the_repository(hyperpod_crd_dir: Path) -> None:
    files = sorted(p.name for p in hyperpod_crd_dir.iterdir())
    assert files == sorted(hyperpod.CRD_FILES)
    assert paths.ROOT not in hyperpod_crd_dir.parents
    crd = yaml.safe_load((hyperpod_crd_dir / "inferenceendpointconfigs.crd.yaml").read_text())
    assert crd["metadata"]["name"] == hyperpod_fields.CRD_NAME
    derived_from = crd["metadata"]["annotations"]["kvtier.io/derived-from"]
    assert f"sagemaker-hyperpod {hyperpod_sdk.pinned_version()}" in derived_from


def test_structural_no_json_schema_only_keywords(hyperpod_sdk_ready) -> None:
    """The API server refuses $ref, anyOf with null, additionalProperties: false next to properties."""
    text = yaml.safe_dump(hyperpod_crd.crd(hyperpod_fields.KIND))
    for keyword in ("$ref", "$defs", "'null'", "title:", "default:"):
        assert keyword not in text, keyword

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            if "properties" in node:
                assert node.get("additionalProperties") in (None,), path
            typed = "type" in node or node.get("x-kubernetes-int-or-string")
            if "properties" in node or "items" in node:
                assert typed, path
            for key, value in node.items():
                walk(value, f"{path}.{key}")

    walk(spec_schema(hyperpod_crd.crd(hyperpod_fields.KIND)), "")


def test_required_fields_come_from_the_sdk(hyperpod_sdk_ready) -> None:
    spec = spec_schema(hyperpod_crd.crd(hyperpod_fields.KIND))["properties"]["spec"]
    assert set(spec["required"]) == {"modelName", "modelSourceConfig", "worker"}
    worker = spec["properties"]["worker"]
    assert set(worker["required"]) == {"image", "modelInvocationPort", "modelVolumeMount", "resources"}
    routing = spec["properties"]["intelligentRoutingSpec"]["properties"]["routingStrategy"]
    assert routing["enum"] == ["prefixaware", "kvaware", "session", "roundrobin"]
    limits = worker["properties"]["resources"]["properties"]["limits"]
    assert limits["additionalProperties"] == {"x-kubernetes-int-or-string": True}


@pytest.mark.parametrize("version", hyperpod_fields.OPERATOR_VERSIONS)
def test_v37_fields_only_from_37(hyperpod_sdk_ready, version: str) -> None:
    spec = spec_schema(hyperpod_crd.crd(hyperpod_fields.KIND, version))
    newer = hyperpod_fields.version_key(version) >= hyperpod_fields.version_key("3.7")
    for field in hyperpod_fields.FIELDS:
        present = hyperpod_fields.lookup(spec, field.path) is not None
        expected = hyperpod_fields.version_key(field.since) <= hyperpod_fields.version_key(version)
        assert present == expected, (version, field.path)
    assert (hyperpod_fields.lookup(spec, "spec.tolerations[].effect") is not None) == newer
    mode = hyperpod_fields.lookup(spec, hyperpod_fields.LMCACHE_MODE_PATH)
    assert (mode or {}).get("enum", []) == (list(hyperpod_fields.LMCACHE_MODES) if newer else [])


def test_to_openapi_conversions() -> None:
    """The JSON-schema shapes Pydantic emits, each as a structural schema (no SDK needed)."""
    source = {
        "$defs": {"Inner": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}},
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "ref": {"anyOf": [{"$ref": "#/$defs/Inner"}, {"type": "null"}], "description": "d"},
            "quantity": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            "free": {"type": "object", "additionalProperties": True},
            "anything": {},
            "one": {"const": "x", "type": "string"},
            "list": {"type": "array", "items": {"type": "object", "additionalProperties": True}},
        },
    }
    out = hyperpod_crd.to_openapi(source)
    props = out["properties"]
    assert "additionalProperties" not in out
    assert props["ref"] == {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
        "description": "d",
    }
    assert props["quantity"] == {"x-kubernetes-int-or-string": True}
    assert props["free"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert props["anything"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert props["one"] == {"enum": ["x"], "type": "string"}
    assert props["list"]["items"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def test_compare_reports_each_kind_of_difference() -> None:
    real = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "pattern": "^x"},
            "b": {"type": "integer"},
            "gone": {"type": "string"},
            "e": {"type": "string", "enum": ["p", "q"]},
        },
    }
    derived = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "string"},
            "new": {"type": "object", "properties": {"deep": {"type": "string"}}},
            "e": {"type": "string", "enum": ["p"]},
        },
    }
    lines = hyperpod_crd.compare(real, derived)
    assert "only in the real CRD: gone (string)" in lines
    assert "only in the derived CRD: new (object)" in lines
    assert not any("new.deep" in line for line in lines), "children of a missing field are not repeated"
    assert "type of b: real integer, derived string" in lines
    assert any(line.startswith("pattern of a:") for line in lines)
    assert any(line.startswith("enum of e:") for line in lines)
    assert hyperpod_crd.compare(real, real) == []
