"""A container's resources as the API server validates them: resource names, extended resources
(nvidia.com/gpu, vpc.amazonaws.com/efa, aws.amazon.com/neuron) and huge pages.

Source (Kubernetes v1.37, the version toolchain/versions.env pins): pkg/apis/core/validation/validation.go
(validateResourceRequirements, validateContainerResourceName, validateResourceName,
ValidateResourceQuantityValue, validateResourceQuantityHugePageValue), the name helpers of
pkg/apis/core/helper/helpers.go (IsNativeResource, IsExtendedResourceName, IsOvercommitAllowed,
IsHugePageResourceValueDivisible) and apimachinery's IsQualifiedName. Docs: "Schedule GPUs", "Manage
HugePages", "Resource Management for Pods and Containers: Extended resources".
tests/cluster/test_resource_rules_vs_apiserver.py holds `judge` to the real API server on generated
containers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

from kvtier import quantity
from kvtier.manifests import at, container_paths, pod_templates, subject
from kvtier.validate.rules import Hit, ManifestsContext, rule

HUGEPAGES = "hugepages-"
CONTAINER_STANDARD = ("cpu", "memory", "ephemeral-storage")
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
# The refusal `requests-within-limits` already reports from the values (a request above its limit):
# `judge` tags it so that the rule does not report it twice.
OVER_LIMIT = "over-limit"


def qualified(name: str) -> bool:
    """apimachinery IsQualifiedName: an optional DNS subdomain prefix and /, then a name of at most 63
    characters of letters, digits, -, _ and ., starting and ending alphanumeric."""
    parts = name.split("/")
    if len(parts) > 2:
        return False
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix or len(prefix) > 253 or not _SUBDOMAIN.fullmatch(prefix):
            return False
    part = parts[-1]
    return 0 < len(part) <= 63 and bool(_NAME_PART.fullmatch(part))


def hugepages(name: str) -> bool:
    return name.startswith(HUGEPAGES)


def native(name: str) -> bool:
    """No domain, or one under kubernetes.io: Kubernetes' own resources."""
    return "/" not in name or "kubernetes.io/" in name


def extended(name: str) -> bool:
    """A domain-prefixed resource a device plugin or the node advertises (nvidia.com/gpu): integer only,
    never overcommitted. Its quota name (requests.<name>) must be a qualified name too."""
    return not native(name) and not name.startswith("requests.") and qualified("requests." + name)


def overcommittable(name: str) -> bool:
    """Whether a request may be below the limit: native resources except huge pages."""
    return native(name) and not hugepages(name)


def _ceil(value: Fraction) -> int:
    return -(-value.numerator // value.denominator)


def _name_problem(name: str) -> str | None:
    if not qualified(name):
        return (
            "is not a qualified name (an optional lowercase DNS prefix and /, then at most 63 letters, "
            "digits, -, _ or ., starting and ending with a letter or digit)"
        )
    if "/" not in name:
        if name in CONTAINER_STANDARD or hugepages(name):
            return None
        return (
            "is not a container resource: without a domain only cpu, memory, ephemeral-storage and "
            "hugepages-<size> are; a device is named with its plugin's domain (nvidia.com/gpu, "
            "vpc.amazonaws.com/efa, aws.amazon.com/neuron)"
        )
    if not native(name) and not extended(name):
        return "does not follow the extended resource name form (a domain, /, a name; not requests.*)"
    return None


def _page_problem(name: str, value: Fraction) -> str | None:
    page = quantity.try_parse(name[len(HUGEPAGES) :])
    if page is None or page <= 0 or _ceil(page * 1000) % 1000:
        return f"{name} does not name a page size (hugepages-2Mi, hugepages-1Gi)"
    if _ceil(value) % _ceil(page):
        return f"is not a whole number of {name[len(HUGEPAGES) :]} pages"
    return None


def _quantity_problems(name: str, value: Fraction) -> Iterator[str]:
    if value < 0:
        yield "is negative"
    # The API server compares the value in thousandths, rounded up (Quantity.MilliValue).
    if extended(name) and _ceil(value * 1000) % 1000:
        yield f"must be a whole number: {name} is an extended resource, counted in whole devices"
    if hugepages(name):
        problem = _page_problem(name, value)
        if problem:
            yield problem


def _block(resources: dict[str, Any], kind: str) -> dict[str, Any]:
    block = resources.get(kind)
    return {str(n): v for n, v in block.items()} if isinstance(block, dict) else {}


def _against_limit(
    name: str, written: Any, value: Fraction, limits: dict[str, Any]
) -> tuple[str, str] | None:
    """(why, kind) where a request is refused against its limit (or its missing limit)."""
    if name not in limits:
        if overcommittable(name):
            return None
        return (
            f"{name} is requested without a limit: it cannot be overcommitted, so the limit must be set "
            "(the request then defaults to it)",
            "",
        )
    cap = quantity.try_parse(limits[name])
    if cap is None or value == cap:
        return None
    # Above the limit, requests-within-limits reports it from the values: tagged, not reported twice.
    above = OVER_LIMIT if value > cap else ""
    if not overcommittable(name):
        return f"request {written} must equal the limit {limits[name]}: {name} cannot be overcommitted", above
    return (f"request {written} is above the limit {limits[name]}", OVER_LIMIT) if above else None


def judge(resources: Any) -> list[tuple[str, str, str]]:
    """(field under resources, why, kind) for each refusal of the API server of one container's resources;
    kind is OVER_LIMIT for a request above its limit, else ''. A quantity
    that does not parse is left to the schema and the API server's decoder."""
    if not isinstance(resources, dict):
        return []
    blocks = {kind: _block(resources, kind) for kind in ("limits", "requests")}
    out: list[tuple[str, str, str]] = []
    for kind, block in blocks.items():
        for name, written in block.items():
            field = f"{kind}[{name}]"
            problem = _name_problem(name)
            if problem:
                out.append((field, f"resource name {name!r} {problem}", ""))
            value = quantity.try_parse(written)
            if value is None:
                continue
            out += [(field, f"{written!r} {why}", "") for why in _quantity_problems(name, value)]
            refused = _against_limit(name, written, value, blocks["limits"]) if kind == "requests" else None
            if refused:
                out.append((field, *refused))
    names = set(blocks["limits"]) | set(blocks["requests"])
    if any(hugepages(n) for n in names) and not names & {"cpu", "memory"}:
        out.append(("", "huge pages need a cpu or memory request or limit beside them", ""))
    return out


def _hits(resources: Any, path: str, who: str, m: dict[str, Any]) -> Iterator[Hit]:
    for field, why, kind in judge(resources):
        if kind == OVER_LIMIT:
            continue  # requests-within-limits reports it, at the values key
        at_field = f"resources.{field}" if field else "resources"
        yield Hit(
            f"{who}: {at_field}: {why}; the API server refuses the pod",
            subject=subject(m),
            manifest_path=f"{path}.{field}" if field else path,
        )


@rule(
    "kube-resources-admitted",
    scope="manifests",
    reason="the API server refuses a pod whose container resources break its validation "
    "(k8s.io/kubernetes pkg/apis/core/validation validateResourceRequirements): a name without a domain "
    "other than cpu, memory, ephemeral-storage and hugepages-<size>; an extended resource (nvidia.com/gpu, "
    "vpc.amazonaws.com/efa, aws.amazon.com/neuron) that is not a whole number, or requested without a "
    "limit, or with a request other than its limit (extended resources and huge pages are never "
    "overcommitted, helpers.go IsOvercommitAllowed); huge pages that are not a whole number of pages of "
    "their size, or without a cpu or memory request or limit beside them. The Deployment exists, no pod "
    "is ever created. Docs: 'Schedule GPUs', 'Manage HugePages'",
    remedy="set a device (nvidia.com/gpu, vpc.amazonaws.com/efa) under limits only, as a whole number (the "
    "request defaults to it); give huge pages equal requests and limits in whole pages, with a memory "
    "request beside them",
)
def resources_admitted(ctx: ManifestsContext) -> Iterator[Hit]:
    for m, where, spec in pod_templates(ctx.manifests):
        for path, c in container_paths(spec, where):
            yield from _hits(c.get("resources"), f"{path}.resources", f"container {c.get('name')}", m)
    for m in ctx.manifests:
        # The HyperPod operator renders a Deployment from the endpoint's worker, resources unchanged.
        if isinstance(m, dict) and m.get("kind") == "InferenceEndpointConfig":
            yield from _hits(at(m, "spec.worker.resources"), "spec.worker.resources", "worker", m)


__all__ = ["OVER_LIMIT", "extended", "judge", "native", "overcommittable", "qualified"]
