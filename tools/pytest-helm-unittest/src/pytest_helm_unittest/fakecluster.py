"""helm-unittest's `kubernetesProvider`: the fake cluster a template's `lookup` reads, as a named template.

Read from helm-unittest at the pinned tag (pkg/unittest/k8s_fake_client.go, test_job.go `renderV3Chart`,
test_suite.go `polishKubernetesProviderSettings`), Helm v3.21.3 (pkg/engine/lookup_func.go) and client-go
v0.36.3 (dynamic/fake/simple.go, testing/fixture.go), apimachinery v0.36.3 (meta.UnsafeGuessKindToResource):

- Only a test with objects (its own, then its suite's) gets the fake client; otherwise `lookup` is Helm's
  client-only one and always answers an empty map. A suite's scheme entries win over the test's.
- Every `lookup` call builds a fresh fake client: each object is stored under the resource guessed from
  its kind (lower case plural) and under its own namespace; storing deep-copies it, which panics on a value
  JSON has no type for (yaml.v3 decodes integers as Go `int`, timestamps as time.Time), and a second
  object with the same resource, namespace and name is refused: every call then fails.
- `scheme["<apiVersion>/<kind>"]` (Go's path.Join) gives the resource to read and whether it is namespaced.
  The namespace argument is used only for a namespaced kind; "" reads cluster scope (a get) or every
  namespace (a list). A get of an object not stored under exactly that resource/namespace/name is an
  empty map. A list (name "") answers `{apiVersion, kind: <Kind>List, metadata: {resourceVersion,
  continue: ""}, items}` sorted by namespace then name, and panics when no stored object's kind guesses
  to the scheme's resource (no list kind registered), a missing scheme entry included.

The answer table is computed here and read by the `kvtier.lookup` named template (see tplrewrite).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from pytest_helm_unittest import govalues

PARTIAL = "_kvtier-lookup.tpl"
_DEFINE = r"""{{- define "kvtier.lookup" -}}
{{- $db := %(db)s | b64dec | fromJson -}}
{{- if $db.error -}}{{- fail $db.error -}}{{- end -}}
{{- $api := index . 0 -}}{{- $kind := index . 1 -}}{{- $ns := index . 2 -}}{{- $name := index . 3 -}}
{{- $key := "" -}}
{{- if and $api $kind -}}{{- $key = clean (printf "%%s/%%s" $api $kind) -}}
{{- else if or $api $kind -}}{{- $key = clean (printf "%%s%%s" $api $kind) -}}{{- end -}}
{{- $e := index $db.scheme $key | default dict -}}
{{- $q := "" -}}{{- if and $e.namespaced $ns -}}{{- $q = $ns -}}{{- end -}}
{{- $out := dict -}}
{{- if $name -}}
{{- $out = dig "objects" $q $name (dict) $e -}}
{{- else if $e.listKind -}}
{{- $items := list -}}
{{- range $e.items -}}
{{- if or (not $q) (eq (index . 0) $q) -}}{{- $items = append $items (index . 1) -}}{{- end -}}
{{- end -}}
{{- $meta := dict "resourceVersion" $e.resourceVersion "continue" "" -}}
{{- $out = dict "apiVersion" $e.listAPIVersion "kind" $e.listKind "metadata" $meta "items" $items -}}
{{- else -}}
{{- fail (printf "error calling lookup: coding error: no list kind registered for %%s" $key) -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}
"""


def merged_provider(test: Any, suite: Any) -> dict[str, Any]:
    """The test's provider with its suite's folded in as helm-unittest does (objects appended, the
    suite's scheme entries overwriting the test's)."""
    test = test if isinstance(test, dict) else {}
    suite = suite if isinstance(suite, dict) else {}
    objects = list(test.get("objects") or []) + list(suite.get("objects") or [])
    scheme = {**(test.get("scheme") or {}), **(suite.get("scheme") or {})}
    return {"objects": objects, "scheme": scheme}


def guess_resource(api_version: str, kind: str) -> tuple[str, str, str]:
    """(group, version, plural resource) as meta.UnsafeGuessKindToResource guesses them."""
    group, _, version = api_version.rpartition("/")
    if api_version.count("/") > 1:
        group, version = "", ""  # schema.ParseGroupVersion refuses it: an empty group/version
    name = kind.lower()
    if not name:
        return group, version, ""
    if name.endswith("endpoints"):
        plural = name
    elif name.endswith("s"):
        plural = name + "es"
    elif name.endswith("y"):
        plural = name[:-1] + "ies"
    else:
        plural = name + "s"
    return group, version, plural


def _not_json(value: Any) -> str:
    """Go type of the first value runtime.DeepCopyJSONValue refuses, or ""."""
    if isinstance(value, dict):
        if not all(govalues.is_go_string(k) for k in value):
            return "map[interface {}]interface {}"
        for item in value.values():
            found = _not_json(item)
            if found:
                return found
        return ""
    if isinstance(value, list):
        return next((found for found in map(_not_json, value) if found), "")
    if value is None or isinstance(value, bool | float) or govalues.is_go_string(value):
        return ""
    return govalues.go_type_name(value)


def _text(value: Any) -> str:
    return value if govalues.is_go_string(value) else ""


def table(provider: dict[str, Any]) -> dict[str, Any]:
    """What every `lookup` answers for this provider: per scheme key, the stored objects and the list."""
    stored: dict[tuple[str, str, str], dict[tuple[str, str], Any]] = {}
    list_kinds: dict[tuple[str, str, str], str] = {}
    for obj in provider["objects"]:
        if not isinstance(obj, dict):
            continue
        bad = _not_json(obj)
        if bad:
            return {"error": f"error calling lookup: cannot deep copy {bad}"}
        api, kind = _text(obj.get("apiVersion")), _text(obj.get("kind"))
        resource = guess_resource(api, kind)
        list_kinds.setdefault(resource, kind + "List")
        meta: dict[Any, Any] = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        namespace, name = _text(meta.get("namespace")), _text(meta.get("name"))
        if not namespace and "namespace" in meta:
            obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "namespace"}}
        objects = stored.setdefault(resource, {})
        if (namespace, name) in objects:
            where = resource[2] + (f".{resource[0]}" if resource[0] else "")
            return {"error": f'error calling lookup: {where} "{name}" already exists'}
        objects[(namespace, name)] = obj
    scheme: dict[str, Any] = {}
    for key, props in (provider["scheme"] or {}).items():
        props = props if isinstance(props, dict) else {}
        gvr: dict[Any, Any] = props["gvr"] if isinstance(props.get("gvr"), dict) else {}
        resource = (_text(gvr.get("group")), _text(gvr.get("version")), _text(gvr.get("resource")))
        objects = stored.get(resource, {})
        by_namespace: dict[str, dict[str, Any]] = {}
        for (namespace, name), obj in objects.items():
            by_namespace.setdefault(namespace, {})[name] = obj
        entry: dict[str, Any] = {"namespaced": props.get("namespaced") is True, "objects": by_namespace}
        if resource in list_kinds:
            group, version = resource[0], resource[1]
            entry["listKind"] = list_kinds[resource]
            entry["listAPIVersion"] = f"{group}/{version}" if group else version
            entry["resourceVersion"] = str(1 + len(objects))
            entry["items"] = [[ns, objects[(ns, n)]] for ns, n in sorted(objects)]
        scheme[str(key)] = entry
    return {"scheme": scheme}


def define(provider: dict[str, Any]) -> str:
    """The `kvtier.lookup` named template answering from this provider's objects."""
    data = json.dumps(_plain(table(provider)), sort_keys=True)
    return _DEFINE % {"db": '"' + base64.b64encode(data.encode()).decode() + '"'}


def _plain(value: Any) -> Any:
    """JSON-ready: a float JSON cannot hold stays as text Go would print (never reached by valid objects)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return govalues.go_format_float(value)
    return str(value) if isinstance(value, str) else value
