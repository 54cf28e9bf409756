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


def _file_for(api_version: str, kind: str) -> str:
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    return f"{kind.lower()}-{group_version}.json"


@cache
def _schema(minor: str, api_version: str, kind: str) -> tuple[Draft202012Validator, str] | None:
    """Validator and a digest of everything it can reach, or None for a kind the version lacks."""
    path = _dir(minor) / _file_for(api_version, kind)
    if not path.is_file():
        return None
    schema = json.loads(path.read_text())
    definitions = _definitions(minor)
    digest = hashlib.sha256(json.dumps(schema, sort_keys=True).encode())
    seen: set[str] = set()
    pending = re.findall(r'"_definitions\.json#/definitions/([^"]+)"', json.dumps(schema))
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        text = json.dumps(definitions.get("definitions", {}).get(name), sort_keys=True)
        digest.update(name.encode() + text.encode())
        pending.extend(re.findall(r'"_definitions\.json#/definitions/([^"]+)"', text))
    registry = Registry().with_resources(
        [("_definitions.json", Resource.from_contents(definitions, default_specification=_spec()))]
    )
    return Draft202012Validator(schema, registry=registry), digest.hexdigest()


def _spec() -> Any:
    from referencing.jsonschema import DRAFT202012

    return DRAFT202012


def check(manifest: dict[str, Any], minor: str) -> list[str] | None:
    """Error messages ("path: message") for one manifest at one minor; None when no schema exists."""
    api_version, kind = str(manifest.get("apiVersion", "")), str(manifest.get("kind", ""))
    with _lock:  # functools.cache is not safe against concurrent first calls building the same entry
        found = _schema(minor, api_version, kind)
    if found is None:
        return None
    validator, digest = found
    key = (digest, hashlib.sha256(json.dumps(manifest, sort_keys=True, default=str).encode()).hexdigest())
    if key not in _results:
        errors = []
        for error in validator.iter_errors(manifest):
            where = ".".join(str(p) for p in error.absolute_path) or "(top)"
            errors.append(f"{where}: {error.message[:300]}")
        _results[key] = errors
    return _results[key]


def builtin_group(api_version: str) -> bool:
    """Whether an apiVersion belongs to Kubernetes itself (core, apps, *.k8s.io), not to a CRD."""
    group = api_version.rpartition("/")[0]
    return group == "" or "." not in group or group.endswith(".k8s.io")


def served_in(api_version: str, kind: str) -> list[str]:
    """The minors (of those kubernetes-validate ships) whose schemas know this kind at this version."""
    name = _file_for(api_version, kind)
    return [minor for minor in available_minors() if (_dir(minor) / name).is_file()]
