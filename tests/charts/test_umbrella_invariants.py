"""Cross-pod invariants of the umbrella, by construction: every engine pod of every model in every
environment gets the same PYTHONHASHSEED, LMCache chunk size, hash algorithm, serde and L2 mount path,
and each model's replicas share one model argument, dtype and TP size (= its GPU count)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from render import find, helm_bin, render, render_docs

from kvtier import helm, paths
from kvtier.engine_rig import rendered
from kvtier.podscripts import tenant_salt

CHART = paths.CHARTS / "kv-tiered-inference"
ENVS = sorted(paths.VALUES.glob("*.yaml"))
SCENARIOS = sorted((CHART / "ci").glob("*-values.yaml"))
STANDALONE = [
    f
    for f in [*ENVS, *SCENARIOS]
    if (yaml.safe_load(f.read_text()) or {}).get("target", "standalone") == "standalone"
]


@pytest.fixture(autouse=True)
def _deps(need) -> None:
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    helm.build_dependencies(CHART)  # no-op while the packaged subchart is current


def values_file(tmp_path: Path, model: dict[str, Any] | None = None, **top: Any) -> Path:
    """A values file with the chart's default model changed by `model` (Helm's --set replaces lists)."""
    default = yaml.safe_load((CHART / "values.yaml").read_text())["models"][0]
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump({"models": [{**default, **(model or {})}], **top}))
    return path


def engines(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Engine workloads: Deployments, or StatefulSets for kvaware (stable per-replica KV-event endpoints)."""
    workloads = find(docs, "Deployment") + find(docs, "StatefulSet")
    return [d for d in workloads if d["metadata"]["labels"].get("app.kubernetes.io/component") == "engine"]


def vllm(deployment: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "vllm")


def env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def lmcache_config(docs: list[dict[str, Any]], deployment: dict[str, Any]) -> dict[str, Any]:
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    name = next(v["configMap"]["name"] for v in volumes if v["name"] == "lmcache-config")
    return yaml.safe_load(find(docs, "ConfigMap", name)[0]["data"]["lmcache.yaml"])


def mount_path(deployment: dict[str, Any], volume: str) -> str | None:
    mounts = vllm(deployment).get("volumeMounts", [])
    return next((m["mountPath"] for m in mounts if m["name"] == volume), None)


@pytest.mark.parametrize("values", STANDALONE, ids=lambda p: p.name)
def test_every_engine_shares_the_cache_invariants(values: Path) -> None:
    docs = render_docs(CHART, values=[values])
    spec = yaml.safe_load(values.read_text())
    deployments = engines(docs)
    assert deployments, "no engine Deployment rendered"
    seeds, chunks, algos, serdes, urls, mounts = set(), set(), set(), set(), set(), set()
    for deployment in deployments:
        container = vllm(deployment)
        seeds.add(env(container)["PYTHONHASHSEED"])
        if "LMCACHE_CONFIG_FILE" in env(container):
            config = lmcache_config(docs, deployment)
            chunks.add(config["chunk_size"])
            algos.add(config["pre_caching_hash_algorithm"])
            serdes.add(config.get("remote_serde"))
            urls.add(rendered.l2_path(config))
            mounts.add(mount_path(deployment, "l2cache"))
        # No LMCACHE_* variable may override the shared file per pod.
        assert not [k for k in env(container) if k.startswith("LMCACHE_") and k != "LMCACHE_CONFIG_FILE"]
    cache = {**{"chunkSize": 256, "hashSeed": "0", "hashAlgorithm": "builtin"}, **(spec.get("cache") or {})}
    assert seeds == {cache["hashSeed"]}
    if chunks:
        assert chunks == {cache["chunkSize"]}
        assert algos == {cache["hashAlgorithm"]}
    l2 = (cache.get("l2") or {}).get("enabled", True)
    if chunks and l2:
        mount = (cache.get("l2") or {}).get("mountPath", "/mnt/curvine/l2cache")
        assert serdes == {"naive"}
        # One namespace per model, under the shared mount (tests/charts/test_umbrella_l2_namespace.py).
        names = {m["name"] for m in spec.get("models") or []}
        assert len(urls) == len(names)
        for directory in urls:
            namespace = rf"{re.escape(mount)}/([a-z0-9-]+)\.[0-9a-f]{{12}}/?"
            assert re.fullmatch(namespace, directory or ""), directory
        assert mounts == {mount}, "every engine pod must mount the L2 claim at the same path"


@pytest.mark.parametrize("values", STANDALONE, ids=lambda p: p.name)
def test_each_model_has_one_model_string_dtype_and_tp(values: Path) -> None:
    docs = render_docs(CHART, values=[values])
    spec = yaml.safe_load(values.read_text())
    models = {m["name"]: m for m in spec.get("models") or []}
    for deployment in engines(docs):
        model = models[deployment["metadata"]["labels"]["kv-tiered-inference/model"]]
        container = vllm(deployment)
        args = container["args"]
        # One pod template per model: every replica runs exactly these arguments.
        assert args[:2] == ["serve", model["model"]]
        assert flag(args, "--served-model-name") == model["model"]
        assert flag(args, "--dtype") == model["dtype"]
        tp = flag(args, "--tensor-parallel-size")
        assert tp == str(model.get("gpusPerReplica", 1))
        cpu = (spec.get("engine") or {}).get("accelerator") == "cpu"
        for kind in ("requests", "limits"):
            assert container["resources"][kind].get("nvidia.com/gpu") == (None if cpu else tp)
        # With engine autoscaling KEDA owns the count; the Deployment must leave it unset.
        autoscaled = ((spec.get("engine") or {}).get("autoscaling") or {}).get("enabled")
        assert deployment["spec"].get("replicas") == (None if autoscaled else model["replicas"])
        if "LMCACHE_CONFIG_FILE" in env(container):
            connector = json.loads(flag(args, "--kv-transfer-config") or "{}")
            policy = (spec.get("cache") or {}).get("kvLoadFailurePolicy", "recompute")
            # cache.tenantIsolation (default on): LMCache's connector with the salt in its keys.
            isolated = (spec.get("cache") or {}).get("tenantIsolation", True)
            salted = {"kv_connector": tenant_salt.CONNECTOR, "kv_connector_module_path": tenant_salt.MODULE}
            assert connector == {
                "kv_connector": "LMCacheConnectorV1",
                "kv_role": "kv_both",
                "kv_load_failure_policy": policy,
            } | (salted if isolated and spec.get("target") != "hyperpod" else {})


def test_two_models_share_seed_chunk_and_path_but_not_config_maps() -> None:
    docs = render_docs(CHART, values=[CHART / "ci" / "custom-values.yaml"])
    deployments = engines(docs)
    assert len(deployments) == 2
    configs = [lmcache_config(docs, d) for d in deployments]
    shared = ("chunk_size", "pre_caching_hash_algorithm", "remote_serde")
    assert {tuple(c[k] for k in shared) for c in configs} == {(512, "sha256_cbor", "naive")}
    # One L2 mount, a namespace per model inside it: two models never read each other's chunks.
    urls = [rendered.l2_path(c) or "" for c in configs]
    assert len(set(urls)) == 2 and all(u.startswith("/var/lib/kv/l2/") for u in urls)
    assert {env(vllm(d))["PYTHONHASHSEED"] for d in deployments} == {"1234"}
    assert {mount_path(d, "l2cache") for d in deployments} == {"/var/lib/kv/l2"}
    assert [flag(vllm(d)["args"], "--served-model-name") for d in deployments] == [
        "Qwen/Qwen2-0.5B-Instruct",
        "Qwen/Qwen2-1.5B-Instruct",
    ]


def test_pvc_model_source_gives_the_same_path_argument_everywhere(tmp_path: Path) -> None:
    source = {"pvc": {"claimName": "weights", "path": "qwen2-7b/"}}
    docs = render_docs(CHART, values=[values_file(tmp_path, {"source": source})])
    deployment = engines(docs)[0]
    assert vllm(deployment)["args"][:2] == ["serve", "/models/qwen2-7b"]
    assert mount_path(deployment, "model") == "/models"
    claim = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "model")
    assert claim["persistentVolumeClaim"] == {"claimName": "weights", "readOnly": True}
    assert "HF_TOKEN" not in env(vllm(deployment))


GPU2 = {"requests": {"cpu": "1"}, "limits": {"memory": "110Gi", "nvidia.com/gpu": 2}}


@pytest.mark.parametrize(
    ("model", "top", "message"),
    [
        ({"extraArgs": ["--dtype=bfloat16"]}, {}, "--dtype is set by the chart"),
        ({"extraArgs": ["--tensor-parallel-size", "2"]}, {}, "--tensor-parallel-size is set by the chart"),
        ({}, {"engine": {"extraEnv": [{"name": "PYTHONHASHSEED", "value": "7"}]}}, "PYTHONHASHSEED is set"),
        ({}, {"engine": {"extraEnv": [{"name": "LMCACHE_CHUNK_SIZE", "value": "7"}]}}, "LMCACHE_CHUNK_SIZE"),
        ({"resources": GPU2}, {}, "gpusPerReplica (= tensor parallel size) is 1"),
    ],
)
def test_overriding_an_invariant_is_refused(
    tmp_path: Path, model: dict[str, Any], top: dict[str, Any], message: str
) -> None:
    result = render(CHART, values=[values_file(tmp_path, model, **top)])
    assert result.returncode != 0
    assert message in result.stderr


def expanded_env(container: dict[str, Any]) -> dict[str, str]:
    """The container's variables as the kubelet sets them: `$(NAME)` expands to a variable defined before it
    (an unknown reference stays as written); a valueFrom reads as `<valueFrom NAME>`."""
    seen: dict[str, str] = {}
    for item in container.get("env", []):
        if "valueFrom" in item:
            seen[item["name"]] = f"<valueFrom {item['name']}>"
            continue
        value = re.sub(r"\$\((\w+)\)", lambda m: seen.get(m[1], m[0]), str(item.get("value", "")))
        seen[item["name"]] = value
    return seen


USER_PYTHONPATHS = {
    "value": ({"name": "PYTHONPATH", "value": "/opt/mine"}, "/opt/mine"),
    "valueFrom": (
        {"name": "PYTHONPATH", "valueFrom": {"configMapKeyRef": {"name": "paths", "key": "python"}}},
        "<valueFrom KVTIER_USER_PYTHONPATH>",
    ),
}


BACKENDS = {
    "lmcache": {},
    "vllm-native": {"cache.backend": "vllm-native", "cache.hashAlgorithm": "sha256"},
}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("form", sorted(USER_PYTHONPATHS))
def test_a_pythonpath_in_extra_env_keeps_the_chart_modules_importable(
    tmp_path: Path, backend: str, form: str
) -> None:
    """The engines import the chart's connector, plugin or tier from the podscripts mount: with a user's
    PYTHONPATH in engine.extraEnv, the one the container ends up with starts with that mount and keeps the
    user's entries after it."""
    item, user_entry = USER_PYTHONPATHS[form]
    values = values_file(tmp_path, engine={"extraEnv": [{"name": "BEFORE", "value": "1"}, item]})
    docs = render_docs(CHART, values=[values], set_values=BACKENDS[backend])
    assert engines(docs)
    for deployment in engines(docs):
        container = vllm(deployment)
        names = [e["name"] for e in container["env"]]
        assert names.count("PYTHONPATH") == 1, names
        mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "podscripts")
        assert expanded_env(container)["PYTHONPATH"].split(":") == [mount, user_entry]
