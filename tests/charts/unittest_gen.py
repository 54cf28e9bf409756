"""Generated charts and helm-unittest suites for the differential test (test_unittest_generated.py).

A chart family exercises what the suite format reaches: a top chart whose templates read values,
release, capabilities and chart metadata, render empty, fail on demand, emit several documents and
NOTES.txt; a subchart behind a `condition`, one behind `tags`, a library chart, and a middle chart whose
own subchart shares the first one's name (each subchart labels itself helm.sh/chart, so `chart:`
overrides show where they reach; the middle one also has a .txt template that is not YAML); CRDs at
three depths. Which subcharts are on is drawn too.
Suites are drawn from every field helm-unittest reads (values files and `set` at suite and test level,
release, capabilities and chart overrides with null and empty values, templates and globs, includeCrds,
documentIndex/documentSelector with skipEmptyTemplates, assertions with and without `not`, snapshots).
Nothing is expected of a case: the test only asks the real helm-unittest and the plugin for the same
verdict. Part of the cases use assertions that hold on the default render, so that about a quarter pass.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

TOP_TEMPLATES = {
    "configmap.yaml": """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-cm
  namespace: {{ .Release.Namespace }}
  labels:
    chart: {{ .Chart.Name }}-{{ .Chart.Version }}
    version: {{ .Chart.AppVersion | default "none" | quote }}
data:
  mode: {{ .Values.mode | quote }}
  {{- with .Values.extra }}
  extra: {{ . | toJson | quote }}
  {{- end }}
  revision: {{ .Release.Revision | quote }}
  upgrade: {{ .Release.IsUpgrade | quote }}
  kube: {{ .Capabilities.KubeVersion.Version | quote }}
  lib: {{ include "lib.name" . | quote }}
  global: {{ .Values.global.g | default "unset" | quote }}
""",
    "deployment.yaml": """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-app
spec:
  replicas: {{ .Values.replicas }}
  template:
    spec:
      containers:
        {{- range .Values.ports }}
        - name: c{{ . }}
          ports:
            - containerPort: {{ . }}
        {{- end }}
""",
    "optional.yaml": """{{- if .Values.optional.enabled }}
apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}-svc
spec:
  ports:
    - port: {{ .Values.optional.port | default 80 }}
{{- end }}
""",
    "multi.yaml": """apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .Release.Name }}-sa
---
{{- if .Values.multi.second }}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-secret
stringData:
  mode: {{ .Values.mode | quote }}
{{- end }}
""",
    "fails.yaml": """{{- if .Values.boom }}
{{- fail "boom requested" }}
{{- end }}
{{- if .Values.boomName }}
{{- fail (printf "boom for %s (%s)" (include "gen.fullname" .) (.Release.Name | lower)) }}
{{- end }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-safe
""",
    "policy.yaml": """{{- if .Capabilities.APIVersions.Has "x.io/v1" }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .Release.Name }}-pdb
spec:
  minAvailable: 1
{{- else if semverCompare ">=1.30-0" .Capabilities.KubeVersion.Version }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-new-kube
{{- end }}
""",
    # kubernetesProvider: a get in the release namespace, a cluster-scoped get, a list over all namespaces
    "lookup.yaml": """{{- $seed := lookup "v1" "ConfigMap" .Release.Namespace "seed" }}
{{- $team := lookup "v1" "Namespace" "" "team-a" }}
{{- $all := lookup "v1" "ConfigMap" "" "" }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-lookup
data:
  seed: {{ dig "data" "value" "none" $seed | quote }}
  team: {{ dig "metadata" "name" "none" $team | quote }}
  listKind: {{ $all.kind | default "none" | quote }}
  names: {{ range $all.items }}{{ .metadata.namespace | default "-" }}/{{ .metadata.name }},{{ end }}
  {{- with $seed.spec }}
  spec: {{ toJson . | quote }}
  {{- end }}
""",
    # .Capabilities.APIVersions: helm-unittest serves only the test's list, Helm's built-ins included
    "apis.yaml": """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-apis
data:
  policy: {{ .Capabilities.APIVersions.Has "policy/v1" | quote }}
  apps: {{ $.Capabilities.APIVersions.Has "apps/v1" | quote }}
  count: {{ len .Capabilities.APIVersions | quote }}
""",
    "NOTES.txt": "Release {{ .Release.Name }} in {{ .Release.Namespace }} mode {{ .Values.mode }}\n",
    "_helpers.tpl": '{{- define "gen.fullname" -}}{{ .Release.Name }}-gen{{- end -}}\n',
}
TOP_VALUES = {
    "mode": "a",
    "extra": {},
    "replicas": 1,
    "ports": [80],
    "optional": {"enabled": False},
    "multi": {"second": True},
    "boom": False,
    "boomName": False,
    "global": {},
    "sub": {"greeting": "hi"},
}
SUB_TEMPLATE = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-{{ .Chart.Name }}
  labels:
    helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 }}
    version: {{ .Chart.AppVersion | default "none" | quote }}
data:
  greeting: {{ .Values.greeting | default "none" | quote }}
  global: {{ .Values.global.g | default "unset" | quote }}
"""
# Text that is no YAML: helm-unittest reads a .txt template as raw text, Helm's manifest parse refuses it
SUB_TEXT = """-----
{{ .Chart.Name }} {{ .Chart.Version }} ready
-----
"""
VALUES_FILES = {
    "b-mode.yaml": {"mode": "b", "replicas": 3},
    "service.yaml": {"optional": {"enabled": True, "port": 8080}, "ports": [1, 2]},
    "nulls.yaml": {"mode": None, "extra": {"k": None}, "multi": {"second": False}},
}
CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.x.io
spec:
  group: x.io
  names: {{kind: {kind}, plural: {plural}}}
"""
TOP_TEMPLATE_NAMES = [n for n in TOP_TEMPLATES if not n.startswith("_")]


def _write(path: Path, content: str | dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False))


def chart_yaml(
    directory: Path, name: str, kind: str = "application", deps: list[dict[str, Any]] | None = None
) -> None:
    """directory/Chart.yaml for a chart of that name, type and dependencies."""
    meta: dict[str, Any] = {"apiVersion": "v2", "name": name, "version": "0.1.0", "type": kind}
    if deps:
        meta["dependencies"] = deps
    _write(directory / "Chart.yaml", meta)


def write_family(root: Path, drawn: Family) -> Path:
    """The drawn chart family written under root/gen (its suites at their paths relative to the top
    chart); returns the top chart."""
    top = root / "gen"
    deps = [
        {"name": "sub", "version": "0.1.0", "condition": "sub.enabled"},
        {"name": "tagged", "version": "0.1.0", "tags": ["t1", "t2"]},
        {"name": "lib", "version": "0.1.0"},
        {"name": "mid", "version": "0.1.0", "condition": "mid.enabled"},
    ]
    chart_yaml(top, "gen", deps=deps)
    for name, text in TOP_TEMPLATES.items():
        _write(top / "templates" / name, text)
    values = yaml.safe_load(yaml.safe_dump(TOP_VALUES))
    values["sub"]["enabled"] = drawn.enabled["sub"]
    values["mid"] = {"enabled": drawn.enabled["mid"]}
    values["tags"] = {"t1": drawn.enabled["tagged"]}
    _write(top / "values.yaml", values)
    for tests_dir in ("tests", "charts/sub/tests", "charts/mid/tests", "charts/mid/charts/sub/tests"):
        for name, content in VALUES_FILES.items():
            _write(top / tests_dir / "values" / name, content)
    for name in ("sub", "tagged"):
        chart_yaml(top / "charts" / name, name)
        _write(top / "charts" / name / "templates" / "cm.yaml", SUB_TEMPLATE)
        _write(top / "charts" / name / "values.yaml", {"greeting": f"{name} default"})
    chart_yaml(top / "charts" / "lib", "lib", "library")
    _write(
        top / "charts" / "lib" / "templates" / "_lib.tpl", '{{- define "lib.name" -}}from-lib{{- end -}}\n'
    )
    _write(top / "charts" / "lib" / "templates" / "dropped.yaml", SUB_TEMPLATE)  # a library renders none
    mid = top / "charts" / "mid"
    chart_yaml(mid, "mid", deps=[{"name": "sub", "version": "0.1.0", "condition": "sub.enabled"}])
    _write(mid / "templates" / "cm.yaml", SUB_TEMPLATE)
    _write(mid / "templates" / "banner.txt", SUB_TEXT)
    chart_yaml(mid / "charts" / "sub", "sub")
    _write(mid / "charts" / "sub" / "templates" / "cm.yaml", SUB_TEMPLATE)
    # CRDs at three depths (includeCrds lists those of every enabled chart in the tree)
    for chart_dir, kind in (
        (top, "Widget"),
        (top / "charts" / "sub", "Gadget"),
        (mid / "charts" / "sub", "Nested"),
    ):
        _write(chart_dir / "crds" / "crd.yaml", CRD.format(kind=kind, plural=kind.lower() + "s"))
    for rel, content in drawn.suites.items():
        _write(top / rel, "".join("---\n" + yaml.safe_dump(s, sort_keys=False) for s in content))
    return top


def package(chart_dir: Path, into: Path, helm: Path) -> Path:
    """`helm package` chart_dir into `into` (a charts/*.tgz dependency); returns the archive."""
    done = subprocess.run(
        [str(helm), "package", str(chart_dir), "-d", str(into)], capture_output=True, text=True, check=True
    )
    return Path(done.stdout.strip().rsplit(" ", 1)[-1])


# --- suite strategies -------------------------------------------------------------------------------

_names = st.sampled_from(["r1", "my-release", "RELEASE-NAME", "", None])
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-1, max_value=4),
    st.sampled_from(["a", "b", "", "0", "true", "x y", "1.30"]),
)
_set_paths = st.sampled_from(
    [
        "mode", "replicas", "ports", "optional.enabled", "optional.port", "multi.second", "boom", "boomName",
        "extra.k", "extra", "global.g", "sub.enabled", "sub.greeting", "tagged.greeting", "tags.t1",
        "mid.enabled", "greeting",
    ]
)  # fmt: skip
_set_values = st.one_of(
    _scalars,
    st.lists(st.integers(min_value=1, max_value=9), max_size=3),
    st.dictionaries(st.sampled_from(["k", "enabled"]), _scalars, max_size=2),
)
_paths = st.sampled_from(
    [
        "data.mode", "metadata.name", "spec.replicas", "kind", "data", "metadata.labels.chart",
        "data.kube", "data.revision", "data.upgrade", "data.lib", "data.global", "data.greeting",
        "spec.template.spec.containers", "spec.template.spec.containers[0].name", "metadata.labels.version",
        "missing.path", "stringData.mode", "spec.ports[0].port", "data.extra", "apiVersion",
        'metadata.labels["helm.sh/chart"]', "data.seed", "data.team", "data.listKind", "data.names",
        "data.policy", "data.count",
    ]
)  # fmt: skip
_expected = st.one_of(
    _scalars,
    st.sampled_from(["r1-cm", "RELEASE-NAME-cm", "my-release-app", "from-lib", "v1.20.0", "gen-0.1.0", "hi"]),
    st.sampled_from(["gen-1.2.3", "sub-0.1.0", "sub-1.2.3", "mid-1.2.3", "mid-not-semver", "9.9"]),
    st.just({"mode": "a"}),
    st.sampled_from(
        ["from-cluster", "ns1-seed", "team-a", "ConfigMapList", "default/seed,ns1/seed,", "false"]
    ),
)
_top_templates = st.sampled_from(
    [
        *TOP_TEMPLATE_NAMES,
        "*.yaml",
        "c*.yaml",
        "templates/multi.yaml",
        "missing.yaml",
        "charts/sub/templates/cm.yaml",
        "charts/mid/templates/banner.txt",
        "crds/crd.yaml",
        "charts/sub/crds/crd.yaml",
        "charts/mid/charts/sub/crds/crd.yaml",
    ]
)
_sub_templates = st.sampled_from(
    ["cm.yaml", "*.yaml", "templates/cm.yaml", "missing.yaml", "NOTES.txt", "crds/crd.yaml", "banner.txt"]
)


def _assertion(templates: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, Any]]:
    path = _paths
    kinds: dict[str, st.SearchStrategy[Any]] = {
        "equal": st.fixed_dictionaries({"path": path, "value": _expected}),
        "exists": st.fixed_dictionaries({"path": path}),
        "isNull": st.fixed_dictionaries({"path": path}),
        "isEmpty": st.fixed_dictionaries({"path": path}),
        "isNullOrEmpty": st.fixed_dictionaries({"path": path}),
        "isKind": st.fixed_dictionaries(
            {
                "of": st.sampled_from(
                    ["ConfigMap", "Deployment", "Secret", "Service", "CustomResourceDefinition"]
                )
            }
        ),
        "isAPIVersion": st.fixed_dictionaries({"of": st.sampled_from(["v1", "apps/v1", "policy/v1"])}),
        "hasDocuments": st.fixed_dictionaries({"count": st.integers(min_value=0, max_value=4)}),
        "matchRegex": st.fixed_dictionaries(
            {"path": path, "pattern": st.sampled_from(["^r", "cm$", "a", ".*"])}
        ),
        "contains": st.fixed_dictionaries(
            {"path": st.just("spec.template.spec.containers"), "content": st.just({"name": "c80"})},
            optional={"any": st.booleans()},
        ),
        "isSubset": st.fixed_dictionaries(
            {"path": st.just("metadata"), "content": st.just({"name": "r1-cm"})}
        ),
        "lengthEqual": st.fixed_dictionaries(
            {"path": st.just("spec.template.spec.containers"), "count": st.integers(min_value=0, max_value=3)}
        ),
        "greaterOrEqual": st.fixed_dictionaries(
            {"path": st.just("spec.replicas"), "value": st.integers(0, 4)}
        ),
        "failedTemplate": st.one_of(
            st.just({}),
            st.fixed_dictionaries(
                {
                    "errorMessage": st.sampled_from(
                        [
                            "boom requested",
                            "other",
                            "boom for RELEASE-NAME-gen (release-name)",
                            "boom for r1-gen (r1)",
                        ]
                    )
                }
            ),
            st.fixed_dictionaries({"errorPattern": st.sampled_from(["boom", "^x", "RELEASE-NAME-gen"])}),
        ),
        "notFailedTemplate": st.just({}),
        "containsDocument": st.fixed_dictionaries(
            {
                "kind": st.sampled_from(["ConfigMap", "Secret"]),
                "apiVersion": st.just("v1"),
                "name": st.sampled_from(["r1-cm", "RELEASE-NAME-cm", "RELEASE-NAME-secret"]),
            }
        ),
        "isType": st.fixed_dictionaries(
            {"path": path, "type": st.sampled_from(["string", "int", "map", "slice"])}
        ),
        "matchSnapshot": st.one_of(st.just({}), st.fixed_dictionaries({"path": st.just("data")})),
        "equalRaw": st.fixed_dictionaries({"value": st.sampled_from(["Release r1 in default mode a", "x"])}),
        "matchRegexRaw": st.fixed_dictionaries(
            {"pattern": st.sampled_from(["^Release", "mode b", "mid 1.2.3 ready", "0.1.0 ready"])}
        ),
    }
    around = st.fixed_dictionaries(
        {},
        optional={
            "not": st.booleans(),
            "template": templates,
            "documentIndex": st.integers(min_value=-1, max_value=2),
        },
    )
    return st.one_of(
        [
            st.tuples(params, around).map(lambda pair, k=kind: {k: pair[0], **pair[1]})
            for kind, params in kinds.items()
        ]
    )


_release = st.fixed_dictionaries(
    {},
    optional={
        "name": _names,
        "namespace": st.sampled_from(["default", "ns1", "", None]),
        "revision": st.sampled_from([1, 3, None]),
        "upgrade": st.sampled_from([True, False, None]),
    },
)
_capabilities = st.fixed_dictionaries(
    {},
    optional={
        "majorVersion": st.sampled_from(["1", 1, "", None]),
        "minorVersion": st.sampled_from(["20", "29", 31, "", None]),
        "apiVersions": st.sampled_from([None, [], ["policy/v1"], ["x.io/v1", "policy/v1"]]),
    },
)
# kubernetesProvider: objects from a small pool (a namespaced get, a cluster-scoped one, a list over
# namespaces; an int value and a repeated object make helm-unittest's fake client fail every lookup)
CLUSTER_OBJECTS = [
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "seed", "namespace": "default"},
     "data": {"value": "from-cluster"}, "spec": {"ratio": 0.5, "on": True, "none": None}},
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "seed", "namespace": "ns1"},
     "data": {"value": "ns1-seed"}},
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "seed", "namespace": "NAMESPACE"},
     "data": {"value": "default-namespace-seed"}},
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "counted"}, "data": {"n": 1}},
]  # fmt: skip
_SCHEMES = {
    "v1/ConfigMap": st.sampled_from([True, False]).map(
        lambda ns: {"gvr": {"version": "v1", "resource": "configmaps"}, "namespaced": ns}
    ),
    "v1/Namespace": st.just({"gvr": {"version": "v1", "resource": "namespaces"}, "namespaced": False}),
}
_good_objects = st.lists(st.sampled_from(CLUSTER_OBJECTS[:4]), max_size=3, unique_by=repr)
_any_objects = st.lists(st.sampled_from(CLUSTER_OBJECTS), min_size=2, max_size=3)  # may fail every lookup
_provider = st.fixed_dictionaries(
    {},
    optional={
        "scheme": st.fixed_dictionaries({}, optional=_SCHEMES),
        "objects": st.one_of(_good_objects, _good_objects, _good_objects, _any_objects),
    },
)
_chart_override = st.fixed_dictionaries(
    {},
    optional={
        "version": st.sampled_from(["1.2.3", "", None, "not-semver", "1.2.3+b.1"]),
        "appVersion": st.sampled_from(["9.9", "", None]),
    },
)
_selector = st.fixed_dictionaries(
    {
        "path": st.sampled_from(["metadata.name", "kind"]),
        "value": st.sampled_from(["r1-cm", "RELEASE-NAME-sa", "Secret", "ConfigMap", "nothing"]),
    },
    optional={"skipEmptyTemplates": st.booleans(), "matchMany": st.booleans()},
)
_values_files = st.lists(st.sampled_from([f"values/{n}" for n in VALUES_FILES]), max_size=2, unique=True)


def _common(versions: bool) -> dict[str, st.SearchStrategy[Any]]:
    """Fields a suite and a test share. `versions` False keeps the Kubernetes version out: helm-unittest
    carries the last version a test set over to later suites, in an order that is random across subcharts."""
    capabilities = (
        _capabilities
        if versions
        else _capabilities.map(lambda c: {k: v for k, v in c.items() if k == "apiVersions"})
    )
    return {
        "values": _values_files,
        "set": st.dictionaries(_set_paths, _set_values, max_size=3),
        "release": _release,
        "capabilities": capabilities,
        "chart": _chart_override,
        "kubernetesProvider": _provider,
    }


# Assertions that hold on the family's default render, so that a fair share of cases pass and the
# values, overrides and selectors drawn around them decide the verdict (random ones nearly always fail).
_HOLDING_TOP = [
    {"equal": {"path": "data.mode", "value": "a"}, "template": "configmap.yaml"},
    {"equal": {"path": "data.lib", "value": "from-lib"}, "template": "configmap.yaml"},
    {"equal": {"path": "metadata.labels.chart", "value": "gen-0.1.0"}, "template": "configmap.yaml"},
    {"matchRegex": {"path": "metadata.name", "pattern": "-cm$"}, "template": "configmap.yaml"},
    {"isKind": {"of": "ConfigMap"}, "template": "configmap.yaml"},
    {"isAPIVersion": {"of": "v1"}, "template": "configmap.yaml"},
    {"hasDocuments": {"count": 1}, "template": "configmap.yaml"},
    {"equal": {"path": "spec.replicas", "value": 1}, "template": "deployment.yaml"},
    {"greaterOrEqual": {"path": "spec.replicas", "value": 1}, "template": "deployment.yaml"},
    {"contains": {"path": "spec.template.spec.containers", "content": {"name": "c80"}},
     "template": "deployment.yaml"},
    {"lengthEqual": {"path": "spec.template.spec.containers", "count": 1}, "template": "deployment.yaml"},
    {"hasDocuments": {"count": 2}, "template": "multi.yaml"},
    {"isKind": {"of": "Secret"}, "template": "multi.yaml", "documentIndex": 1},
    {"hasDocuments": {"count": 0}, "template": "optional.yaml"},
    {"notFailedTemplate": {}, "template": "fails.yaml"},
    {"isNullOrEmpty": {"path": "missing.path"}, "template": "fails.yaml"},
    {"matchRegexRaw": {"pattern": "^Release"}, "template": "NOTES.txt"},
    {"exists": {"path": "data.kube"}, "template": "configmap.yaml"},
    {"equal": {"path": "data.seed", "value": "none"}, "template": "lookup.yaml"},
    {"equal": {"path": "data.policy", "value": "false"}, "template": "apis.yaml"},
    {"equal": {"path": "data.count", "value": "0"}, "template": "apis.yaml"},
]  # fmt: skip
_HOLDING_SUB = [
    {"isKind": {"of": "ConfigMap"}, "template": "cm.yaml"},
    {"exists": {"path": "data.greeting"}, "template": "cm.yaml"},
    {"equal": {"path": "data.global", "value": "unset"}, "template": "cm.yaml"},
    {"matchRegex": {"path": 'metadata.labels["helm.sh/chart"]', "pattern": "-0.1.0$"}, "template": "cm.yaml"},
    {"hasDocuments": {"count": 1}, "template": "cm.yaml"},
]
_HOLDING = {True: st.sampled_from(_HOLDING_TOP), False: st.sampled_from(_HOLDING_SUB)}


def _tests(top: bool) -> st.SearchStrategy[dict[str, Any]]:
    templates = _top_templates if top else _sub_templates
    optional = {
        **_common(top),
        "templates": st.lists(templates, max_size=2),
        "documentIndex": st.integers(min_value=0, max_value=1),
        "documentSelector": _selector,
    }
    drawn = st.fixed_dictionaries(
        {"asserts": st.lists(_assertion(templates), min_size=1, max_size=3)}, optional=optional
    )
    # a quieter case: holding assertions, and only values files or a release around them
    quiet = st.fixed_dictionaries(
        {"asserts": st.lists(_HOLDING[top], min_size=1, max_size=3)},
        optional={"values": _values_files, "release": _release},
    )
    return st.one_of(drawn, quiet)


_TESTS = {top: _tests(top) for top in (True, False)}  # built once: building strategies is slow


def _suite_fields(top: bool) -> st.SearchStrategy[dict[str, Any]]:
    templates = _top_templates if top else _sub_templates
    optional: dict[str, st.SearchStrategy[Any]] = {
        **_common(top),
        "templates": st.lists(templates, min_size=1, max_size=3),
        "excludeTemplates": st.lists(templates, max_size=1),
        "includeCrds": st.booleans(),
    }
    quiet = st.fixed_dictionaries({}, optional={"values": _values_files, "release": _release})
    return st.one_of(st.fixed_dictionaries({}, optional=optional), quiet)


_SUITES = {top: _suite_fields(top) for top in (True, False)}


def suite(name: str, tests: int, top: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    """A suite of the top chart, or (top False) of a subchart: its templates, no Kubernetes version."""
    cases = st.lists(_TESTS[top], min_size=tests, max_size=tests)
    return st.tuples(_SUITES[top], cases).map(
        lambda pair: {
            "suite": name,
            **pair[0],
            "tests": [{"it": f"case {i}", **t} for i, t in enumerate(pair[1])],
        }
    )


class Family:
    """A drawn chart family: which subcharts the top values switch on, and the suites by file."""

    def __init__(self, enabled: dict[str, bool], suites: dict[str, list[dict[str, Any]]]) -> None:
        self.enabled, self.suites = enabled, suites

    def __repr__(self) -> str:  # hypothesis prints a failing example; the suites are kept on disk instead
        count = sum(len(s["tests"]) for file in self.suites.values() for s in file)
        return f"Family(enabled={self.enabled}, {count} tests)"


@st.composite
def family(draw: st.DrawFn, tests_per_suite: int = 10) -> Family:
    enabled = {name: draw(st.booleans()) for name in ("sub", "tagged", "mid")}
    half = tests_per_suite // 2
    suites = {
        "tests/gen_a_test.yaml": [
            draw(suite("gen a", tests_per_suite)),
            draw(suite("gen b", tests_per_suite)),
        ],
        "tests/gen_c_test.yaml": [draw(suite("gen c", tests_per_suite))],
        "charts/sub/tests/sub_test.yaml": [draw(suite("sub", half, top=False))],
        "charts/mid/tests/mid_test.yaml": [draw(suite("mid", half, top=False))],
        "charts/mid/charts/sub/tests/sub_test.yaml": [draw(suite("mid sub", half, top=False))],
    }
    return Family(enabled, suites)
