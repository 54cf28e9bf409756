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

DEFAULT_MINORS = ("1.30", "1.31", "1.32", "1.33", "1.34", "1.35")
_lock = threading.Lock()
_results: dict[tuple[str, str], list[str]] = {}


def available_minors() -> list[str]:
    root = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    found = {m.group(1) for p in root.iterdir() if (m := re.match(r"v(\d+\.\d+)\.0-local-strict$", p.name))}
    return sorted(found, key=lambda v: tuple(map(int, v.split("."))))


def _dir(minor: str) -> Any:
    return resources.files("kubernetes_validate") / "kubernetes-json-schema" / f"v{minor}.0-local-strict"


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
    path = _dir(minor) / _file_for(api_version, kind)
    if not path.is_file():
        return None
    return Draft202012Validator(json.loads(path.read_text()), registry=_registry(minor))


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


def _projection(node: Any, instance: Any, defs: dict[str, Any], out: list[str], depth: int = 0) -> None:
    """Append everything of `node` that can decide the verdict for this `instance`: the schema as
    this manifest sees it (properties it does not use, descriptions and annotations left out).
    Two minors whose projections are equal give the same verdict, so only one is validated."""
    if depth > 60 or not isinstance(node, dict):
        out.append(repr(node))
        return
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.rpartition("/")[2]
        out.append(name)
        _projection(defs.get(name), instance, defs, out, depth + 1)
    out.append(_own(node))
    if isinstance(instance, dict):
        props = node.get("properties") or {}
        extra = node.get("additionalProperties")
        for key in sorted(instance):
            sub = props.get(key, extra)
            out.append(("p:" if key in props else "x:") + key)
            if isinstance(sub, dict):
                _projection(sub, instance[key], defs, out, depth + 1)
    elif isinstance(instance, list) and isinstance(node.get("items"), dict):
        for item in instance:
            _projection(node["items"], item, defs, out, depth + 1)


def check(manifest: dict[str, Any], minor: str) -> list[str] | None:
    """Error messages ("path: message") for one manifest at one minor; None when no schema exists."""
    api_version, kind = str(manifest.get("apiVersion", "")), str(manifest.get("kind", ""))
    with _lock:  # functools.cache is not safe against concurrent first calls building the same entry
        found = _schema(minor, api_version, kind)
    if found is None:
        return None
    validator = found
    # The same manifest at the same minor (Helm 3 and Helm 4 usually render identical objects) has
    # the same verdict: skip even the projection.
    manifest_hash = hashlib.sha256(json.dumps(manifest, sort_keys=True, default=str).encode()).hexdigest()
    seen = _results.get((minor, manifest_hash))
    if seen is not None:
        return seen
    projection: list[str] = []
    _projection(validator.schema, manifest, _definitions(minor).get("$defs", {}), projection)
    key = (hashlib.sha256("\n".join(projection).encode()).hexdigest(), manifest_hash)
    if key not in _results:
        errors = []
        for error in validator.iter_errors(manifest):
            where = ".".join(str(p) for p in error.absolute_path) or "(top)"
            errors.append(f"{where}: {error.message[:300]}")
        _results[key] = errors
    _results[(minor, manifest_hash)] = _results[key]
    return _results[key]


def builtin_group(api_version: str) -> bool:
    """Whether an apiVersion belongs to Kubernetes itself (core, apps, *.k8s.io), not to a CRD."""
    group = api_version.rpartition("/")[0]
    return group == "" or "." not in group or group.endswith(".k8s.io")


def served_in(api_version: str, kind: str) -> list[str]:
    """The minors (of those kubernetes-validate ships) whose schemas know this kind at this version."""
    name = _file_for(api_version, kind)
    return [minor for minor in available_minors() if (_dir(minor) / name).is_file()]
