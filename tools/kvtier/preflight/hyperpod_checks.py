"""Checks that only matter for `target: hyperpod` (HyperPod Inference Operator on EKS)."""

from __future__ import annotations

from typing import Any

from kvtier.cluster.common import discovery
from kvtier.preflight.model import Result, Target
from kvtier.upstream import hyperpod_fields
from kvtier.upstream.hyperpod_fields import CRD_NAME as ENDPOINT_CRD
from kvtier.upstream.hyperpod_fields import KIND as ENDPOINT_KIND

CERT_MANAGER_CRD = "certificates.cert-manager.io"
# HyperPod's tiered storage runs as this DaemonSet (names used by AWS's HyperPod set-up automation).
TIERED_STORAGE = ("aws-hyperpod", "ai-toolkit")


CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def hyperpod_crds(t: Target) -> Result:
    crd = t.rest.find(f"{CRDS}/{ENDPOINT_CRD}")
    if crd is None:
        return Result("hyperpod-crds", "fail", f"CRD {ENDPOINT_CRD} is not installed")
    if t.manifests is None:
        return Result(
            "hyperpod-crds",
            "warn",
            f"CRD present; cannot render the install to compare fields: {t.render_error}",
        )
    endpoints = [o for o in t.manifests if o.get("kind") == ENDPOINT_KIND]
    missing = []
    for obj in endpoints:
        version = obj["apiVersion"].rpartition("/")[2]
        served = [v for v in crd["spec"]["versions"] if v["name"] == version and v.get("served")]
        if not served:
            missing.append(f"version {version} is not served")
            continue
        spec_schema = served[0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        name = obj["metadata"]["name"]
        missing += [f"{name}: spec.{path}" for path in unknown_fields(obj.get("spec", {}), spec_schema)]
    if missing:
        return Result(
            "hyperpod-crds",
            "fail",
            "fields the bundle sets that the installed operator does not know: "
            + ", ".join(sorted(set(missing)))
            + _older_operator_hint(missing),
        )
    return Result(
        "hyperpod-crds", "pass", f"{ENDPOINT_CRD} knows every field of {len(endpoints)} endpoint(s)"
    )


def _older_operator_hint(missing: list[str]) -> str:
    """Names the operator version a missing field needs, when a later operator version added it."""
    unknown = [m.split(": ", 1)[-1] for m in missing]  # "<endpoint>: spec.x" -> "spec.x"
    since = {
        f.since
        for f in hyperpod_fields.FIELDS
        if f.since != hyperpod_fields.OPERATOR_VERSIONS[0]
        and any(f.path == u or f.path.startswith(f"{u}.") for u in unknown)
    }
    if not since:
        return ""
    newest = max(since, key=hyperpod_fields.version_key)
    return (
        f"; the installed operator is older than {newest}: upgrade it, or set hyperpod.operator.version "
        "to its version (the chart then refuses what it lacks)"
    )


def unknown_fields(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Dotted paths in `value` that `schema` (structural OpenAPI v3) does not declare."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    out = []
    if isinstance(value, dict):
        # A structural schema prunes any key it does not declare (unless additionalProperties allows it).
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = f"{path}.{key}" if path else key
            if key in props:
                out += unknown_fields(item, props[key], sub)
            elif isinstance(extra, dict):
                out += unknown_fields(item, extra, sub)
            elif extra is not True:
                out.append(sub)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            out += unknown_fields(item, schema["items"], f"{path}[{index}]")
    return out


def cert_manager(t: Target) -> Result:
    if t.rest.find(f"{CRDS}/{CERT_MANAGER_CRD}") is None:
        return Result("cert-manager", "fail", f"CRD {CERT_MANAGER_CRD} is not installed")
    found = t.rest.get("/apis/apps/v1/deployments", labelSelector="app.kubernetes.io/name=cert-manager")[
        "items"
    ]
    if not found:
        return Result(
            "cert-manager",
            "warn",
            "cert-manager CRDs present but no Deployment labelled app.kubernetes.io/name=cert-manager",
        )
    return Result("cert-manager", "pass", f"cert-manager in namespace {found[0]['metadata']['namespace']}")


def tiered_storage(t: Target) -> Result:
    users = [
        o["metadata"]["name"]
        for o in t.manifests or []
        if o.get("kind") == "InferenceEndpointConfig"
        and o.get("spec", {}).get("kvCacheSpec", {}).get("l2CacheSpec", {}).get("l2CacheBackend")
        == "tieredstorage"
    ]
    namespace, name = TIERED_STORAGE
    ds = t.rest.find(f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}")
    if ds is None:
        if users:
            return Result(
                "tiered-storage",
                "fail",
                f"endpoint(s) {', '.join(users)} use tieredstorage; DaemonSet {namespace}/{name} is missing",
            )
        return Result("tiered-storage", "pass", "not needed: no endpoint sets l2CacheBackend: tieredstorage")
    status = ds.get("status", {})
    ready, wanted = status.get("numberReady", 0), status.get("desiredNumberScheduled", 0)
    if users and (wanted == 0 or ready < wanted):
        return Result("tiered-storage", "fail", f"DaemonSet {namespace}/{name}: {ready}/{wanted} pods ready")
    return Result("tiered-storage", "pass", f"DaemonSet {namespace}/{name}: {ready}/{wanted} pods ready")


def admission_policy(t: Target) -> Result:
    for version in ("v1", "v1beta1"):
        if discovery.find(t.rest, f"admissionregistration.k8s.io/{version}", "MutatingAdmissionPolicy"):
            return Result("admission-policy", "pass", f"MutatingAdmissionPolicy served at {version}")
    return Result(
        "admission-policy", "fail", "MutatingAdmissionPolicy is not served (neither v1 nor v1beta1)"
    )
