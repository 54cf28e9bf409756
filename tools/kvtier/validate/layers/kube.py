"""Rendered manifests against the strict Kubernetes OpenAPI schemas of each supported minor version.

The schemas come from the kubernetes-validate package (PyPI). Unlike its `validate()` (which re-reads
the 1.5 MB definitions file on every call), schemas load once per process, and a validation result is
reused wherever the schema a kind reaches is byte-identical across minors (most kinds between 1.30 and
1.35) and the manifest is identical (Helm 3 and Helm 4 renders usually are).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from kvtier.validate.options import DEFAULT_MINORS

__all__ = ["DEFAULT_MINORS", "available_minors", "builtin_group", "check", "check_minors", "served_in"]

_lock = threading.Lock()
_results: dict[tuple[str, str], list[str]] = {}


def available_minors() -> list[str]:
    root = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    found = {m.group(1) for p in root.iterdir() if (m := re.match(r"v(\d+\.\d+)\.0-local-strict$", p.name))}
    return sorted(found, key=lambda v: tuple(map(int, v.split("."))))


def _dir(minor: str) -> Any:
    return resources.files("kubernetes_validate") / "kubernetes-json-schema" / f"v{minor}.0-local-strict"


@cache
def _files(minor: str) -> frozenset[str]:
    """The schema files of a minor, listed once (a stat per lookup is slow on network filesystems)."""
    return frozenset(entry.name for entry in _dir(minor).iterdir())


@cache
def _definitions(minor: str) -> dict[str, Any]:
    return json.loads((_dir(minor) / "_definitions.json").read_text())


def preload(minors: tuple[str, ...]) -> None:
    """Parse each minor's definitions ahead of use (called in a thread while Helm renders)."""
    for minor in minors:
        with _lock:
            _registry(minor)


def _file_for(api_version: str, kind: str) -> str:
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    return f"{kind.lower()}-{group_version}.json"


@cache
def _registry(minor: str) -> Registry:
    """The minor's definitions, registered under their own $id (so no lookup ever has to crawl)."""
    resource = Resource.from_contents(_definitions(minor), default_specification=DRAFT202012)
    return resource @ Registry()


@cache
def _schema(minor: str, api_version: str, kind: str) -> Draft202012Validator | None:
    """Validator of a kind at a minor, or None for a kind the version lacks."""
    name = _file_for(api_version, kind)
    if name not in _files(minor):
        return None
    return Draft202012Validator(json.loads((_dir(minor) / name).read_text()), registry=_registry(minor))


_STRUCTURE = ("properties", "additionalProperties", "items", "$ref", "description", "readOnly")


_keywords: dict[
    int, str
] = {}  # id(schema node) -> its verdict-relevant keywords as JSON (nodes live forever)


def _own(node: dict[str, Any]) -> str:
    text = _keywords.get(id(node))
    if text is None:
        rest = {k: v for k, v in node.items() if k not in _STRUCTURE and not k.startswith("x-kubernetes")}
        extra = node.get("additionalProperties")
        text = _keywords[id(node)] = json.dumps(
            [rest, extra if not isinstance(extra, dict) else {}], sort_keys=True
        )
    return text


Lane = tuple[Any, dict[str, Any], list[str]]  # (schema node, the minor's $defs, its projection so far)


def _projections(lanes: list[Lane], instance: Any, depth: int = 0) -> None:
    """Append to each lane's list everything of its schema node that can decide the verdict for this
    `instance`: the schema as this manifest sees it (properties it does not use, descriptions and
    annotations left out). There is one lane per minor, and all walk the manifest together, so each
    part of it is visited once whatever the number of minors. Two minors whose projections are equal
    give the same verdict, so only one is validated."""
    followed: list[Lane] = []
    objects: list[Lane] = []
    for node, defs, out in lanes:
        if depth > 60 or not isinstance(node, dict):
            out.append(repr(node))
            continue
        ref = node.get("$ref")
        if isinstance(ref, str):
            name = ref.rpartition("/")[2]
            out.append(name)
            followed.append((defs.get(name), defs, out))
        objects.append((node, defs, out))
    if followed:
        _projections(followed, instance, depth + 1)
    for node, _, out in objects:
        out.append(_own(node))
    if isinstance(instance, dict):
        for key in sorted(instance):
            inner: list[Lane] = []
            for node, defs, out in objects:
                props = node.get("properties") or {}
                sub = props.get(key, node.get("additionalProperties"))
                out.append(("p:" if key in props else "x:") + key)
                if isinstance(sub, dict):
                    inner.append((sub, defs, out))
            if inner:
                _projections(inner, instance[key], depth + 1)
    elif isinstance(instance, list):
        inner = [(n["items"], defs, out) for n, defs, out in objects if isinstance(n.get("items"), dict)]
        if inner:
            for item in instance:
                _projections(inner, item, depth + 1)


def check_minors(manifest: dict[str, Any], minors: tuple[str, ...]) -> dict[str, list[str] | None]:
    """Error messages ("path: message") for one manifest at each minor; None where no schema exists."""
    api_version, kind = str(manifest.get("apiVersion", "")), str(manifest.get("kind", ""))
    with _lock:  # functools.cache is not safe against concurrent first calls building the same entry
        validators = {minor: _schema(minor, api_version, kind) for minor in minors}
    present = {minor: v for minor, v in validators.items() if v is not None}
    verdicts: dict[str, list[str] | None] = {minor: None for minor in validators if minor not in present}
    # The same manifest at the same minor (Helm 3 and Helm 4 usually render identical objects) has
    # the same verdict: skip even the projection.
    manifest_hash = hashlib.sha256(json.dumps(manifest, sort_keys=True, default=str).encode()).hexdigest()
    pending = []
    for minor in present:
        seen = _results.get((minor, manifest_hash))
        if seen is None:
            pending.append(minor)
        else:
            verdicts[minor] = seen
    outs: dict[str, list[str]] = {minor: [] for minor in pending}
    lanes = [(present[m].schema, _definitions(m).get("$defs", {}), outs[m]) for m in pending]
    if lanes:
        _projections(lanes, manifest)
    for minor in pending:
        key = (hashlib.sha256("\n".join(outs[minor]).encode()).hexdigest(), manifest_hash)
        if key not in _results:
            _results[key] = [
                f"{'.'.join(str(p) for p in error.absolute_path) or '(top)'}: {error.message[:300]}"
                for error in present[minor].iter_errors(manifest)
            ]
        verdicts[minor] = _results[(minor, manifest_hash)] = _results[key]
    return verdicts


def check(manifest: dict[str, Any], minor: str) -> list[str] | None:
    """Error messages for one manifest at one minor; None when no schema exists."""
    return check_minors(manifest, (minor,))[minor]


# *.k8s.io groups that Kubernetes approves but serves only through CRDs (no schema in kubernetes-validate):
# Gateway API (the router HTTPRoutes).
CRD_SERVED_GROUPS = frozenset({"gateway.networking.k8s.io"})


def builtin_group(api_version: str) -> bool:
    """Whether an apiVersion belongs to Kubernetes itself (core, apps, *.k8s.io), not to a CRD."""
    group = api_version.rpartition("/")[0]
    if group in CRD_SERVED_GROUPS:
        return False
    return group == "" or "." not in group or group.endswith(".k8s.io")


def served_in(api_version: str, kind: str) -> list[str]:
    """The minors (of those kubernetes-validate ships) whose schemas know this kind at this version."""
    name = _file_for(api_version, kind)
    return [minor for minor in available_minors() if name in _files(minor)]
