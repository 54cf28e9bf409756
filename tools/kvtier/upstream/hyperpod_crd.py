"""The HyperPod operator's CRDs, derived from AWS's SDK models, so that no test needs files from outside.

The operator is closed source and its CRDs ship only inside its chart; the SDK (`sagemaker-hyperpod`,
hyperpod_sdk) carries Pydantic models of the same spec and status. Their JSON schemas become a
structural `openAPIV3Schema` here; fields an operator version has that the pinned SDK lacks (v3.7's
`tolerations` and `lmcache.mode`, hyperpod_fields) are added for the versions that have them. The result
is written to a folder the caller chooses (tests: a temporary one), never into the repository. Where the
real CRD is at hand (../shared), tests/cluster/test_hyperpod_crd_derivation.py lists the differences.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from kvtier.upstream import hyperpod_fields, hyperpod_sdk

KINDS = {  # kind -> (plural, singular)
    "InferenceEndpointConfig": (hyperpod_fields.PLURAL, "inferenceendpointconfig"),
    "JumpStartModel": ("jumpstartmodels", "jumpstartmodel"),
}
# Keywords an openAPIV3Schema of a CRD keeps; the rest (title, default, additionalProperties: false, ...)
# is JSON-Schema-only or would make the API server default or refuse what the SDK allows.
KEEP = ("description", "pattern", "maxLength", "minLength", "minimum", "maximum", "maxItems", "minItems")

# Kubernetes' core/v1 Toleration, the shape of v3.7's spec.tolerations items.
TOLERATION = {
    "type": "object",
    "properties": {
        "key": {"type": "string"},
        "operator": {"type": "string", "enum": ["Exists", "Equal"]},
        "value": {"type": "string"},
        "effect": {"type": "string", "enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]},
        "tolerationSeconds": {"type": "integer", "format": "int64"},
    },
}


def _overlays(operator_version: str) -> dict[str, dict[str, Any]]:
    """spec properties this operator version has beyond the pinned SDK's models."""
    key = hyperpod_fields.version_key
    out: dict[str, dict[str, Any]] = {}
    if key(operator_version) >= key(hyperpod_fields.TOLERATIONS_SINCE):
        out["tolerations"] = {
            "type": "array",
            "description": "Tolerations of the inference pods (operator >= 3.7; not in the SDK models).",
            "items": TOLERATION,
        }
    if key(operator_version) >= key(hyperpod_fields.MULTIPROCESS_SINCE):
        out["lmcache"] = {
            "type": "object",
            "description": "LMCache process model (operator >= 3.7; not in the SDK models).",
            "properties": {"mode": {"type": "string", "enum": list(hyperpod_fields.LMCACHE_MODES)}},
        }
    return out


def to_openapi(schema: dict[str, Any]) -> dict[str, Any]:
    """A Pydantic JSON schema (with $defs) as a structural openAPIV3Schema: references inlined, Optional
    unwrapped, int-or-string and free-form objects in Kubernetes' own extensions."""
    defs = schema.get("$defs", {})

    def convert(node: dict[str, Any]) -> dict[str, Any]:
        if "$ref" in node:
            target = convert(defs[node["$ref"].rsplit("/", 1)[-1]])
            return target | ({"description": node["description"]} if "description" in node else {})
        if "anyOf" in node:
            options = [o for o in node["anyOf"] if o.get("type") != "null"]
            types = sorted(o.get("type", "") for o in options)
            if types == ["integer", "string"]:
                out: dict[str, Any] = {"x-kubernetes-int-or-string": True}
            elif len(options) == 1:
                out = convert(options[0])
            else:  # a union the API server cannot express: accept what the SDK checks
                out = {"x-kubernetes-preserve-unknown-fields": True}
            return out | {k: node[k] for k in KEEP if k in node}
        out = {k: node[k] for k in KEEP if k in node}
        if "const" in node:
            out["enum"] = [node["const"]]
        if "enum" in node:
            out["enum"] = list(node["enum"])
        kind = node.get("type")
        if kind is None:  # typing.Any
            return out | {"x-kubernetes-preserve-unknown-fields": True}
        out["type"] = kind
        if "exclusiveMinimum" in node:
            out |= {"minimum": node["exclusiveMinimum"], "exclusiveMinimum": True}
        if kind == "array":
            out["items"] = convert(node.get("items") or {"type": "object", "additionalProperties": True})
        elif kind == "object":
            if "properties" in node:
                out["properties"] = {k: convert(v) for k, v in node["properties"].items()}
                if node.get("required"):
                    out["required"] = list(node["required"])
            extra = node.get("additionalProperties")
            if isinstance(extra, dict) and extra:
                out["additionalProperties"] = convert(extra)
            elif "properties" not in node:
                out["x-kubernetes-preserve-unknown-fields"] = True
        return out

    return convert({k: v for k, v in schema.items() if k != "$defs"})


def crd(kind: str, operator_version: str = hyperpod_fields.NEWEST) -> dict[str, Any]:
    """The CustomResourceDefinition of one kind as an operator of this version serves it (v1 only)."""
    models = hyperpod_sdk.schemas()["kinds"][kind]
    spec = to_openapi(models["spec"])
    spec["properties"] |= copy.deepcopy(_overlays(operator_version))  # PR #464: both kinds got them
    plural, singular = KINDS[kind]
    versions = hyperpod_sdk.schemas()["versions"]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{hyperpod_fields.GROUP}",
            "annotations": {
                "kvtier.io/derived-from": f"sagemaker-hyperpod {versions['sagemaker-hyperpod']} "
                f"{models['model']}; operator {operator_version}",
            },
        },
        "spec": {
            "group": hyperpod_fields.GROUP,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": singular},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": hyperpod_fields.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": to_openapi(models["status"]),
                            },
                        }
                    },
                }
            ],
        },
    }


def write(folder: Path, operator_version: str = hyperpod_fields.NEWEST) -> list[Path]:
    """The derived CRDs as YAML files in `folder` (created); their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for kind, (plural, _) in KINDS.items():
        file = folder / f"{plural}.crd.yaml"
        file.write_text(yaml.safe_dump(crd(kind, operator_version), sort_keys=False))
        out.append(file)
    return out


def _walk(node: dict[str, Any], path: str, out: dict[str, dict[str, Any]]) -> None:
    out[path] = node
    for name, sub in (node.get("properties") or {}).items():
        _walk(sub, f"{path}.{name}" if path else name, out)
    if isinstance(node.get("items"), dict):
        _walk(node["items"], f"{path}[]", out)
    if isinstance(node.get("additionalProperties"), dict):
        _walk(node["additionalProperties"], f"{path}{{}}", out)


def _shape(node: dict[str, Any]) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "int-or-string"
    if node.get("x-kubernetes-preserve-unknown-fields") and not node.get("properties"):
        return f"{node.get('type', 'any')} (free-form)"
    return str(node.get("type", "any"))


def compare(real: dict[str, Any], derived: dict[str, Any]) -> list[str]:
    """Differences between two openAPIV3Schemas of a CRD version, one line each: fields only one has, and
    fields both have with another type, enum or required list. Below a free-form node of either side
    nothing is compared."""
    ours: dict[str, dict[str, Any]] = {}
    theirs: dict[str, dict[str, Any]] = {}
    _walk(real, "", theirs)
    _walk(derived, "", ours)

    def free_above(path: str, side: dict[str, dict[str, Any]]) -> bool:
        return any(
            path.startswith(p) and p != path and "free-form" in _shape(n) for p, n in side.items() if p
        )

    lines = []
    for path in sorted(theirs.keys() - ours.keys()):
        if not free_above(path, ours) and not any(
            path.startswith(f"{p}.") for p in theirs.keys() - ours.keys()
        ):
            lines.append(f"only in the real CRD: {path} ({_shape(theirs[path])})")
    for path in sorted(ours.keys() - theirs.keys()):
        if not free_above(path, theirs) and not any(
            path.startswith(f"{p}.") for p in ours.keys() - theirs.keys()
        ):
            lines.append(f"only in the derived CRD: {path} ({_shape(ours[path])})")
    for path in sorted(ours.keys() & theirs.keys()):
        a, b = theirs[path], ours[path]
        if "free-form" in _shape(a) or "free-form" in _shape(b):
            continue
        where = path or "<root>"
        if _shape(a) != _shape(b):
            lines.append(f"type of {where}: real {_shape(a)}, derived {_shape(b)}")
        for keyword in ("enum", "required"):
            if sorted(a.get(keyword) or []) != sorted(b.get(keyword) or []):
                lines.append(f"{keyword} of {where}: real {a.get(keyword)}, derived {b.get(keyword)}")
        if a.get("pattern") != b.get("pattern"):
            lines.append(f"pattern of {where}: real {a.get('pattern')!r}, derived {b.get('pattern')!r}")
    return lines
