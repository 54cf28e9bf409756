"""The HyperPod target as rendered by the pinned Helm, checked by AWS's SDK and the operator's CRD schema.

The InferenceEndpointConfig objects go through the pinned `sagemaker-hyperpod` SDK's own Pydantic models
and through the CRD's openAPIV3Schema as derived from that SDK for the operator version
(kvtier.upstream.hyperpod_crd; tests/charts/test_hyperpod_crd.py compares it with the real one where
../shared has it), made strict: the API server would silently prune an unknown field, so a typo would
otherwise pass unnoticed. The admission policy objects are validated against Kubernetes' own schemas
(kubernetes-validate, strict) for each minor version that serves their API version.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from harness.hyperpod_patch import applied_env, by_endpoint
from kvtier import helm, paths
from kvtier.cluster.common import hyperpod as hyperpod_crds
from kvtier.podscripts import l2_adapter
from kvtier.upstream import hyperpod_crd, hyperpod_fields, hyperpod_sdk

CHART = paths.CHARTS / "kv-tiered-inference"
ENV = paths.VALUES / "hyperpod-g6e-4xlarge.yaml"
MAP_V1 = "admissionregistration.k8s.io/v1"
MAP_V1BETA1 = "admissionregistration.k8s.io/v1beta1"
SOURCES = {
    "huggingface": {
        "huggingface": {"tokenSecret": {"name": "hf-token", "key": "token"}, "revision": "a" * 40}
    },
    "s3": {"s3": {"bucket": "models", "region": "us-west-2", "path": "qwen2-7b"}},
    "fsx": {"fsx": {"fileSystemId": "fs-0123", "dnsName": "fs.example", "mountName": "abcd", "path": "qwen"}},
}
TOLERATIONS = [
    {
        "key": "sagemaker.amazonaws.com/node-health-status",
        "operator": "Equal",
        "value": "Schedulable",
        "effect": "NoSchedule",
    }
]
# operator 3.7 features: (helm args, what the SDK 3.12.0 models do not know)
V37 = {
    "multiprocess": (["--set", "hyperpod.lmcache.mode=MultiProcess"], {"spec.lmcache"}),
    "tolerations": (["--set-json", f"hyperpod.tolerations={json.dumps(TOLERATIONS)}"], {"spec.tolerations"}),
}


@pytest.fixture
def render(need):
    need((paths.TOOLS_BIN / "helm3").exists(), "pinned Helm 3 not built (make tools)")
    need((CHART / "Chart.yaml").exists(), "umbrella chart charts/kv-tiered-inference not present yet")
    helm.build_dependencies(CHART)

    def run(*args: str, major: int = 3) -> list[dict[str, Any]]:
        cmd = ["template", "kv", str(CHART), "-n", "team-a", "-f", str(ENV), *args]
        result = helm.run(cmd, major=major)
        assert result.returncode == 0, result.stderr
        return [doc for doc in yaml.safe_load_all(result.stdout) if doc]

    return run


def kinds(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d.get("kind") == kind]


def schema_of(crd: dict[str, Any]) -> dict[str, Any]:
    version = next(v for v in crd["spec"]["versions"] if v["name"] == hyperpod_fields.VERSION)
    return version["schema"]["openAPIV3Schema"]


@functools.cache
def operator_schema(folder: str) -> dict[str, Any]:
    crds = hyperpod_crds.crd_manifests(Path(folder))
    return schema_of(next(c for c in crds if c["metadata"]["name"] == hyperpod_fields.CRD_NAME))


@pytest.fixture
def crd_schema(hyperpod_crd_dir) -> dict[str, Any]:
    """The newest operator's CRD schema, derived from the SDK into a temporary folder."""
    return copy.deepcopy(operator_schema(str(hyperpod_crd_dir)))


def strict_json_schema(node: Any) -> Any:
    """An openAPIV3Schema as JSON Schema, closed wherever the CRD lists properties (strict validation)."""
    if isinstance(node, list):
        return [strict_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: strict_json_schema(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    closed = not node.get("x-kubernetes-preserve-unknown-fields")
    if "properties" in node and "additionalProperties" not in node and closed:
        out["additionalProperties"] = False
    return out


def validator(crd_schema: dict[str, Any]) -> jsonschema.Validator:
    return jsonschema.Draft7Validator(strict_json_schema(copy.deepcopy(crd_schema)))


def errors(crd_schema: dict[str, Any], obj: dict[str, Any]) -> list[str]:
    return [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator(crd_schema).iter_errors(obj)
    ]


def model_with(source: dict[str, Any]) -> dict[str, Any]:
    env = yaml.safe_load(ENV.read_text())
    model = dict(env["models"][0])
    model["source"] = source
    return model


def set_json_models(source: str) -> list[str]:
    return ["--set-json", f"models={json.dumps([model_with(SOURCES[source])])}"]


@pytest.mark.parametrize("major", [3, 4])
@pytest.mark.parametrize("source", sorted(SOURCES))
def test_endpoints_valid_against_operator_crd(render, crd_schema, need, source: str, major: int) -> None:
    need((paths.TOOLS_BIN / f"helm{major}").exists(), f"pinned Helm {major} not built (make tools)")
    docs = render("--set", f"hyperpod.patch.apiVersion={MAP_V1}", *set_json_models(source), major=major)
    endpoints = kinds(docs, "InferenceEndpointConfig")
    assert [e["metadata"]["name"] for e in endpoints] == ["qwen2-7b"]
    for endpoint in endpoints:
        assert endpoint["apiVersion"] == f"{hyperpod_fields.GROUP}/{hyperpod_fields.VERSION}"
        assert errors(crd_schema, endpoint) == []
        assert endpoint["spec"]["modelSourceConfig"]["modelSourceType"] == source


def test_strict_crd_check_catches_what_the_api_server_would_prune(render, crd_schema) -> None:
    """The check can fail: an unknown field and a strategy the CRD does not accept are reported."""
    endpoint = kinds(render("--set", f"hyperpod.patch.apiVersion={MAP_V1}"), "InferenceEndpointConfig")[0]
    broken = copy.deepcopy(endpoint)
    broken["spec"]["kvCacheSpec"]["l2CacheSpec"]["l2CacheBackendd"] = "fs"
    broken["spec"]["intelligentRoutingSpec"]["routingStrategy"] = "cache_aware"
    found = errors(crd_schema, broken)
    assert any("l2CacheBackendd" in e for e in found), found
    assert any("routingStrategy" in e for e in found), found


def test_the_reference_environment(render) -> None:
    docs = render("--set", f"hyperpod.patch.apiVersion={MAP_V1}")
    (endpoint,) = kinds(docs, "InferenceEndpointConfig")
    spec = endpoint["spec"]
    assert (spec["modelSourceConfig"]["huggingFaceModel"]["modelId"], spec["replicas"]) == (
        "Qwen/Qwen2-7B-Instruct",
        2,
    )
    assert spec["instanceType"] == "ml.g6e.4xlarge"
    assert spec["kvCacheSpec"]["enableL1Cache"] is True and spec["kvCacheSpec"]["enableL2Cache"] is True
    # No router of the bundle's own in this target: the operator routes.
    assert not [d for d in docs if "router" in d["metadata"]["name"] and d["kind"] == "Deployment"]
    workers = kinds(docs, "DaemonSet")
    assert any("/opt/dlami/nvme/curvine-data" in yaml.safe_dump(w) for w in workers), (
        "Curvine workers on NVMe"
    )


def used_paths(node: Any, prefix: str = "") -> set[str]:
    """Dotted paths of what a rendered object sets; stops at opaque values (args, resources)."""
    if isinstance(node, dict) and prefix not in ("spec.worker.resources",):
        found: set[str] = set()
        for key, value in node.items():
            found |= used_paths(value, f"{prefix}.{key}" if prefix else key)
        return found
    return {prefix}


def test_field_list_for_preflight_equals_what_the_chart_renders(render) -> None:
    rendered: set[str] = set()
    scenarios = [set_json_models(s) for s in sorted(SOURCES)]
    scenarios.append(["--set", "hyperpod.l2CachePlaceholder.localUrl=redis://cache:6379"])
    scenarios += [args for args, _ in V37.values()]
    for extra in scenarios:
        docs = render("--set", f"hyperpod.patch.apiVersion={MAP_V1}", *extra)
        for endpoint in kinds(docs, "InferenceEndpointConfig"):
            rendered |= {p for p in used_paths(endpoint["spec"], "spec")}
    listed = {f.path for f in hyperpod_fields.FIELDS}
    assert rendered - listed == set(), "rendered but missing from tools/kvtier/upstream/hyperpod_fields.py"
    assert listed - rendered == set(), "listed in hyperpod_fields.py but never rendered"


@pytest.mark.parametrize("field", hyperpod_fields.FIELDS, ids=lambda f: f.path)
def test_listed_field_exists_in_operator_crd(crd_schema, field: hyperpod_fields.Field) -> None:
    node = hyperpod_fields.lookup(crd_schema, field.path)
    assert node is not None, f"{field.path} not in the operator's CRD"
    assert node.get("type") == field.type
    for value in field.values:
        schema = strict_json_schema({k: v for k, v in node.items() if k in ("type", "enum", "pattern")})
        assert jsonschema.Draft7Validator(schema).is_valid(value), f"{field.path} refuses {value!r}"


def test_lookup_reports_a_missing_field(crd_schema) -> None:
    # The worker has no volumeMounts field: the reason the L2 mount needs the admission patch.
    assert hyperpod_fields.lookup(crd_schema, "spec.worker.volumeMounts") is None
    assert (
        hyperpod_fields.lookup(crd_schema, "spec.tags[].name")
        == crd_schema["properties"]["spec"]["properties"]["tags"]["items"]["properties"]["name"]
    )


@pytest.mark.parametrize(
    ("api_version", "minors"),
    [(MAP_V1, ("1.36.0", "1.37.0")), (MAP_V1BETA1, ("1.34.0", "1.35.0"))],
)
def test_policy_objects_valid_kubernetes_schema(render, api_version: str, minors: tuple[str, ...]) -> None:
    docs = render("--set", f"hyperpod.patch.apiVersion={api_version}")
    policy = kinds(docs, "MutatingAdmissionPolicy")
    binding = kinds(docs, "MutatingAdmissionPolicyBinding")
    assert len(policy) == 1 and len(binding) == 1
    assert binding[0]["spec"]["policyName"] == policy[0]["metadata"]["name"]
    for minor in minors:
        for obj in policy + binding:
            assert obj["apiVersion"] == api_version
            kubernetes_validate.validate(obj, minor, strict=True)


@pytest.mark.parametrize("major", [3, 4])
def test_helm_lint_strict_hyperpod(render, need, major: int) -> None:
    need((paths.TOOLS_BIN / f"helm{major}").exists(), f"pinned Helm {major} not built (make tools)")
    args = ["lint", "--strict", str(CHART), "-n", "team-a", "-f", str(ENV)]
    result = helm.run([*args, "--set", f"hyperpod.patch.apiVersion={MAP_V1}"], major=major)
    assert result.returncode == 0, result.stdout + result.stderr


def test_refuses_without_policy_api_and_says_what_to_do(render) -> None:
    args = ["template", "kv", str(CHART), "-n", "team-a", "-f", str(ENV)]
    result = helm.run([*args, "--set", "hyperpod.patch.apiVersion="])
    assert result.returncode != 0
    assert "serves no MutatingAdmissionPolicy API" in result.stderr
    assert "hyperpod.patch.apiVersion" in result.stderr and "Traceback" not in result.stderr


# AWS's SDK models ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("major", [3, 4])
@pytest.mark.parametrize("source", sorted(SOURCES))
def test_endpoints_valid_for_the_sdk_models(
    render, hyperpod_sdk_ready, need, source: str, major: int
) -> None:
    need((paths.TOOLS_BIN / f"helm{major}").exists(), f"pinned Helm {major} not built (make tools)")
    docs = render("--set", f"hyperpod.patch.apiVersion={MAP_V1}", *set_json_models(source), major=major)
    specs = [e["spec"] for e in kinds(docs, "InferenceEndpointConfig")]
    assert len(specs) == 1
    assert hyperpod_sdk.validate_specs(specs) == [[]]


@pytest.mark.parametrize("feature", sorted(V37))
def test_v37_fields_reported_as_unknown_to_the_sdk(render, hyperpod_sdk_ready, feature: str) -> None:
    """SDK 3.12.0 has no model of v3.7's fields: reported as unknown, not as a wrong value."""
    args, unknown = V37[feature]
    (endpoint,) = kinds(
        render("--set", f"hyperpod.patch.apiVersion={MAP_V1}", *args), "InferenceEndpointConfig"
    )
    (problems,) = hyperpod_sdk.validate_specs([endpoint["spec"]])
    assert {p.path for p in problems} == unknown
    assert all(p.unknown for p in problems), problems


def test_sdk_reports_a_wrong_value(render, hyperpod_sdk_ready) -> None:
    (endpoint,) = kinds(render("--set", f"hyperpod.patch.apiVersion={MAP_V1}"), "InferenceEndpointConfig")
    broken = copy.deepcopy(endpoint["spec"])
    broken["intelligentRoutingSpec"]["routingStrategy"] = "cache_aware"
    broken["worker"].pop("image")
    (problems,) = hyperpod_sdk.validate_specs([broken])
    assert {p.path for p in problems} == {"spec.intelligentRoutingSpec.routingStrategy", "spec.worker.image"}
    assert not any(p.unknown for p in problems)


# Operator versions ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("feature", sorted(V37))
def test_v37_fields_valid_for_the_37_crd_and_refused_by_older(
    render, hyperpod_sdk_ready, feature: str
) -> None:
    args, unknown = V37[feature]
    (endpoint,) = kinds(
        render("--set", f"hyperpod.patch.apiVersion={MAP_V1}", *args), "InferenceEndpointConfig"
    )
    assert errors(schema_of(hyperpod_crd.crd(hyperpod_fields.KIND, "3.7")), endpoint) == []
    old = errors(schema_of(hyperpod_crd.crd(hyperpod_fields.KIND, "3.6")), endpoint)
    (field,) = unknown
    assert any("Additional properties" in e and field.split(".")[-1] in e for e in old), old


def test_multiprocess_renders_the_mode_and_patches_the_sidecar(render) -> None:
    docs = render("--set", f"hyperpod.patch.apiVersion={MAP_V1}", *V37["multiprocess"][0])
    (endpoint,) = kinds(docs, "InferenceEndpointConfig")
    assert endpoint["spec"]["lmcache"] == {"mode": "MultiProcess"}
    (policy,) = kinds(docs, "MutatingAdmissionPolicy")
    cache = next(v for v in policy["spec"]["variables"] if v["name"] == "cache")
    assert cache["expression"] == '"lmcache-server"'
    # InProcess (the default): no lmcache field at all, the vLLM container (named like the Deployment).
    docs = render("--set", f"hyperpod.patch.apiVersion={MAP_V1}")
    (endpoint,) = kinds(docs, "InferenceEndpointConfig")
    assert "lmcache" not in endpoint["spec"] and "tolerations" not in endpoint["spec"]
    (policy,) = kinds(docs, "MutatingAdmissionPolicy")
    cache = next(v for v in policy["spec"]["variables"] if v["name"] == "cache")
    assert cache["expression"] == "object.metadata.name"


def test_kyverno_refuses_multiprocess(render) -> None:
    """Only the MutatingAdmissionPolicy appends the sidecar's --l2-adapter argument."""
    cmd = [
        "template",
        "kv",
        str(CHART),
        "-n",
        "team-a",
        "-f",
        str(ENV),
        "--set",
        "hyperpod.patch.mechanism=kyverno",
    ]
    result = helm.run([*cmd, *V37["multiprocess"][0]])
    assert result.returncode != 0
    assert "MultiProcess needs the MutatingAdmissionPolicy patch" in result.stderr
    (policy,) = kinds(render("--set", "hyperpod.patch.mechanism=kyverno"), "Policy")
    each = policy["spec"]["rules"][0]["mutate"]["foreach"][0]
    assert each["preconditions"]["all"][0]["value"] == "{{ request.object.metadata.name }}"


def rendered_l2_adapters(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The --l2-adapter JSON the MultiProcess patch appends, per endpoint."""
    (policy,) = kinds(docs, "MutatingAdmissionPolicy")
    (expression,) = [
        m["jsonPatch"]["expression"] for m in policy["spec"]["mutations"] if "l2-adapter" in str(m)
    ]
    assert 'value: ["--l2-adapter", variables.adapter]' in expression
    return {name: json.loads(arg) for name, arg in by_endpoint(policy, "adapter").items()}


def l2_adapter_path(adapter: dict[str, Any]) -> str:
    """The L2 directory of an --l2-adapter: the sealed adapter's adapter_params, or LMCache's fs adapter's."""
    if adapter["type"] == "plugin":
        assert (adapter["module_path"], adapter["class_name"]) == ("l2_adapter", "KvtierSealedFSL2Adapter")
        assert set(adapter) == {"type", "module_path", "class_name", "adapter_params"}, adapter
        return adapter["adapter_params"]["base_path"]
    assert adapter["type"] == "fs" and set(adapter) == {"type", "base_path"}, adapter
    return adapter["base_path"]


@pytest.mark.parametrize("integrity", ["true", "false"])
def test_multiprocess_l2_adapter_is_the_sealed_or_lmcaches_filesystem_adapter(render, integrity: str) -> None:
    """The argument the sidecar gets: with cache.l2.integrity (the default) the bundle's sealed adapter,
    through LMCache's `plugin` type, with the podscripts ConfigMap mounted and PYTHONPATH on it; without,
    LMCache 0.5's `fs` L2 adapter. Either on the endpoint's namespace under the L2 mount, the directory its
    LMCACHE_REMOTE_URL names (tests/engine/test_hyperpod_l2_config.py parses it with LMCache's own argument
    parser and drives the adapter LMCache builds from it); sealed files get a namespace of their own."""
    args = ("--set", f"hyperpod.patch.apiVersion={MAP_V1}", *V37["multiprocess"][0])
    docs = render(*args, "--set", f"cache.l2.integrity={integrity}")
    (adapter,) = rendered_l2_adapters(docs).values()
    assert adapter["type"] == ("plugin" if integrity == "true" else "fs")
    path = l2_adapter_path(adapter)
    assert re.fullmatch(r"/mnt/curvine/l2cache/qwen2-7b\.[0-9a-f]{12}", path), adapter
    if integrity == "true":  # the module the sidecar imports names the same adapter
        assert adapter == l2_adapter.adapter_argument(path)
    (policy,) = kinds(docs, "MutatingAdmissionPolicy")
    (url,) = by_endpoint(policy, "l2env").values()
    assert url == f"fs://localhost:0{path}/"
    env = applied_env(policy, "qwen2-7b")
    expression = json.dumps(policy)
    assert "kvtier_l2" not in expression  # the InProcess plugin's variables are not the sidecar's
    if integrity == "true":
        (scripts,) = [d for d in kinds(docs, "ConfigMap") if d["metadata"]["name"].endswith("-podscripts")]
        assert {"l2_adapter.py", "l2_blocks.py", "l2_integrity.py"} <= set(scripts["data"])
        assert env["PYTHONPATH"] == "/opt/kvtier/podscripts"
        assert 'mountPath: \\"/opt/kvtier/podscripts\\", readOnly: true' in expression
        assert re.search(r'checksum/l2-plugin\\": \\"[0-9a-f]{64}', expression)
    else:
        assert "PYTHONPATH" not in env and "kvtier-podscripts" not in expression
    other = render(*args, "--set", f"cache.l2.integrity={ {'true': 'false', 'false': 'true'}[integrity] }")
    assert l2_adapter_path(next(iter(rendered_l2_adapters(other).values()))) != path
    custom = render(*args, "--set", f"cache.l2.integrity={integrity}", "--set", "cache.l2.mountPath=/data/l2")
    (adapter,) = rendered_l2_adapters(custom).values()
    assert l2_adapter_path(adapter).startswith("/data/l2/qwen2-7b.")
    inprocess = render("--set", f"hyperpod.patch.apiVersion={MAP_V1}")
    (policy,) = kinds(inprocess, "MutatingAdmissionPolicy")
    assert "l2-adapter" not in json.dumps(policy)


def test_a_stale_adapter_of_either_kind_is_found(render) -> None:
    """An --l2-adapter an earlier release wrote for another namespace, LMCache's fs form (chart <= 0.10 or
    integrity off) or the sealed form, is matched by the patch's `stale` variable; another tool's is not."""
    docs = render("--set", f"hyperpod.patch.apiVersion={MAP_V1}", *V37["multiprocess"][0])
    (policy,) = kinds(docs, "MutatingAdmissionPolicy")
    (stale,) = [v["expression"] for v in policy["spec"]["variables"] if v["name"] == "stale"]
    prefixes = re.findall(r'a\.startsWith\(("(?:[^"\\]|\\.)*")\)', stale)
    starts = [json.loads(p) for p in prefixes]
    fs_form = json.dumps(
        {"base_path": "/mnt/curvine/l2cache/qwen2-7b.000000000000", "type": "fs"}, separators=(",", ":")
    )
    sealed = json.dumps(
        {"adapter_params": {"base_path": "/mnt/curvine/l2cache/qwen2-7b.000000000000"}, "class_name": "X"},
        separators=(",", ":"),
    )
    foreign = json.dumps({"type": "fs", "base_path": "/elsewhere"})
    assert all(any(arg.startswith(p) for p in starts) for arg in (fs_form, sealed))
    assert not any(foreign.startswith(p) for p in starts)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--set", "hyperpod.lmcache.mode=MultiProcess", "--set", "hyperpod.operator.version=3.6"],
            "MultiProcess needs operator >= 3.7",
        ),
        (
            [
                "--set-json",
                f"hyperpod.tolerations={json.dumps(TOLERATIONS)}",
                "--set",
                "hyperpod.operator.version=3.2",
            ],
            "hyperpod.tolerations needs operator >= 3.7",
        ),
        (
            ["--set", "hyperpod.lmcache.mode=MultiProcess", "--set", "hyperpod.worker.image.tag=v0.4.7"],
            "needs LMCache >= 0.5.0",
        ),
    ],
    ids=["multiprocess-on-3.6", "tolerations-on-3.2", "multiprocess-old-lmcache"],
)
def test_refuses_what_the_operator_rejects(render, args: list[str], message: str) -> None:
    cmd = [
        "template",
        "kv",
        str(CHART),
        "-n",
        "team-a",
        "-f",
        str(ENV),
        "--set",
        f"hyperpod.patch.apiVersion={MAP_V1}",
    ]
    result = helm.run([*cmd, *args])
    assert result.returncode != 0
    assert message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("version", hyperpod_fields.OPERATOR_VERSIONS)
def test_every_operator_version_renders_the_reference_environment(render, crd_schema, version: str) -> None:
    docs = render(
        "--set", f"hyperpod.patch.apiVersion={MAP_V1}", "--set", f"hyperpod.operator.version={version}"
    )
    (endpoint,) = kinds(docs, "InferenceEndpointConfig")
    assert errors(schema_of(hyperpod_crd.crd(hyperpod_fields.KIND, version)), endpoint) == []


def two_endpoints(second: dict[str, Any] | None = None) -> list[str]:
    """--set-json for the environment's model plus a second endpoint (`second` overrides its fields)."""
    first = yaml.safe_load(ENV.read_text())["models"][0]
    other = {**first, "name": "llama", "model": "meta-llama/Llama-3.1-8B-Instruct", **(second or {})}
    return ["--set-json", f"models={json.dumps([first, other])}"]


def kyverno_template(rule: dict[str, Any]) -> dict[str, Any]:
    """The pod template one Kyverno rule merges into its endpoint's Deployment."""
    return rule["mutate"]["foreach"][0]["patchStrategicMerge"]["spec"]["template"]


def env_of_both_mechanisms(render, *args: str) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """{endpoint: the variables the patch sets}, as the MutatingAdmissionPolicy and as the Kyverno Policy
    set them."""
    (policy,) = kinds(
        render("--set", f"hyperpod.patch.apiVersion={MAP_V1}", *args), "MutatingAdmissionPolicy"
    )
    (kyverno,) = kinds(render("--set", "hyperpod.patch.mechanism=kyverno", *args), "Policy")
    by_rule = {}
    for rule in kyverno["spec"]["rules"]:
        (name,) = rule["match"]["any"][0]["resources"]["names"]
        (container,) = kyverno_template(rule)["spec"]["containers"]
        by_rule[name] = {e["name"]: e["value"] for e in container["env"] if "$patch" not in e}
    return {name: applied_env(policy, name) for name in by_endpoint(policy, "l2env")}, by_rule


def l2_dir(env: dict[str, str]) -> str:
    """The endpoint's L2 directory the patch's variables name: the L2 plugin's base_path, or the fs URL's."""
    if "LMCACHE_EXTRA_CONFIG" in env:
        assert "LMCACHE_REMOTE_URL" not in env, env
        return json.loads(env["LMCACHE_EXTRA_CONFIG"])["remote_storage_plugin.kvtier_l2.base_path"]
    url = env["LMCACHE_REMOTE_URL"]
    assert url.startswith("fs://localhost:0") and url.endswith("/"), url
    return url.removeprefix("fs://localhost:0").removesuffix("/")


def l2_dirs_of_both_mechanisms(render, *args: str) -> tuple[dict[str, str], dict[str, str]]:
    """Each endpoint's L2 directory as the MutatingAdmissionPolicy and as the Kyverno Policy set it."""
    mapped, kyverno = env_of_both_mechanisms(render, *args)
    return {k: l2_dir(v) for k, v in mapped.items()}, {k: l2_dir(v) for k, v in kyverno.items()}


@pytest.mark.parametrize("integrity", ["true", "false"])
def test_each_endpoint_gets_its_own_l2_namespace_on_both_mechanisms(render, integrity: str) -> None:
    """Every endpoint's model argument is /opt/ml/model, so LMCache's chunk key cannot tell two endpoints'
    models apart: the patch gives each its own directory, the same on either mechanism, and the two
    mechanisms set the same variables. Sealed files (cache.l2.integrity) get namespaces of their own."""
    args = (*two_endpoints(), "--set", f"cache.l2.integrity={integrity}")
    mapped_env, kyverno_env = env_of_both_mechanisms(render, *args)
    assert mapped_env == kyverno_env and sorted(mapped_env) == ["llama", "qwen2-7b"]
    mapped, _ = l2_dirs_of_both_mechanisms(render, *args)
    assert len(set(mapped.values())) == 2, mapped
    for name, path in mapped.items():
        assert re.fullmatch(rf"/mnt/curvine/l2cache/{name}\.[0-9a-f]{{12}}", path), path
    flipped = {"true": "false", "false": "true"}[integrity]
    other, _ = l2_dirs_of_both_mechanisms(render, *two_endpoints(), "--set", f"cache.l2.integrity={flipped}")
    assert set(other.values()).isdisjoint(mapped.values()), "sealed and unsealed files share no namespace"


def test_inprocess_integrity_loads_the_charts_l2_plugin_on_both_mechanisms(render) -> None:
    """cache.l2.integrity (the default) in InProcess mode: LMCache's own variables load the chart's plugin
    (remote_storage_plugins, extra_config) from the podscripts ConfigMap, mounted read-only and imported by
    PYTHONPATH, and the pod template carries the plugin's checksum; recordHits adds its interval. The
    operator's LMCACHE_REMOTE_URL is removed, not replaced."""
    docs = render(
        "--set", f"hyperpod.patch.apiVersion={MAP_V1}", "--set", "cache.l2.eviction.recordHits=true"
    )
    (scripts,) = [d for d in kinds(docs, "ConfigMap") if d["metadata"]["name"].endswith("-podscripts")]
    assert {"l2_connector.py", "l2_integrity.py", "l2_hits.py"} <= set(scripts["data"])
    (policy,) = kinds(docs, "MutatingAdmissionPolicy")
    env = applied_env(policy, "qwen2-7b")
    assert env["LMCACHE_REMOTE_STORAGE_PLUGINS"] == "kvtier_l2"
    assert env["PYTHONPATH"] == "/opt/kvtier/podscripts"
    extra = json.loads(env["LMCACHE_EXTRA_CONFIG"])
    prefix = "remote_storage_plugin.kvtier_l2."
    assert {k.removeprefix(prefix): v for k, v in extra.items()} == {
        "module_path": "l2_connector",
        "class_name": "KvtierFSConnector",
        "base_path": l2_dir(env),
        "verify": True,
        "hit_interval_s": 60,
    }
    removed = [
        m["jsonPatch"]["expression"] for m in policy["spec"]["mutations"] if m["patchType"] == "JSONPatch"
    ]
    assert any('"LMCACHE_REMOTE_URL" in variables.env' in e for e in removed)
    apply = next(m for m in policy["spec"]["mutations"] if m["patchType"] == "ApplyConfiguration")
    expression = apply["applyConfiguration"]["expression"]
    assert f'name: "{scripts["metadata"]["name"]}"' in expression
    assert 'mountPath: "/opt/kvtier/podscripts", readOnly: true' in expression
    (kyverno,) = kinds(render("--set", "hyperpod.patch.mechanism=kyverno"), "Policy")
    template = kyverno_template(kyverno["spec"]["rules"][0])
    checksum = template["metadata"]["annotations"]["checksum/l2-plugin"]
    assert re.fullmatch(r"[0-9a-f]{64}", checksum) and f'"checksum/l2-plugin": "{checksum}"' in expression
    assert {"name": "kvtier-podscripts", "configMap": {"name": scripts["metadata"]["name"]}} in template[
        "spec"
    ]["volumes"]
    (container,) = template["spec"]["containers"]
    assert {"name": "LMCACHE_REMOTE_URL", "$patch": "delete"} in container["env"]
    assert {
        "name": "kvtier-podscripts",
        "mountPath": "/opt/kvtier/podscripts",
        "readOnly": True,
    } in container["volumeMounts"]


def test_integrity_off_renders_no_plugin(render) -> None:
    """With cache.l2.integrity off the InProcess patch is LMCache's own fs connector, as before the plugin."""
    docs = render("--set", f"hyperpod.patch.apiVersion={MAP_V1}", "--set", "cache.l2.integrity=false")
    (policy,) = kinds(docs, "MutatingAdmissionPolicy")
    text = json.dumps(policy)
    assert "kvtier_l2" not in text and "kvtier-podscripts" not in text and "checksum/l2-plugin" not in text
    assert "LMCACHE_REMOTE_URL" in applied_env(policy, "qwen2-7b")


@pytest.mark.parametrize(
    "change",
    [
        {"dtype": "bfloat16"},
        {"gpusPerReplica": 2},
        {"model": "meta-llama/Llama-3.2-3B-Instruct"},
        {"source": {"huggingface": {"revision": "b" * 40}}},
        {"source": {"s3": {"bucket": "models", "region": "us-west-2", "path": "llama-v2"}}},
    ],
)
def test_what_changes_an_endpoints_kv_moves_only_its_namespace(render, change: dict[str, Any]) -> None:
    before, _ = l2_dirs_of_both_mechanisms(render, *two_endpoints())
    after, kyverno = l2_dirs_of_both_mechanisms(render, *two_endpoints(change))
    assert after == kyverno
    assert after["qwen2-7b"] == before["qwen2-7b"]
    assert after["llama"] != before["llama"]
