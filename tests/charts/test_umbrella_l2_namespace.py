"""Each model's L2 namespace (the directory in LMCache's remote_url, or the L2 plugin's base path) changes
with everything that makes its chunks valid, and with nothing else. LMCache's own key misses the model's
identity beyond the model argument string (../shared/DESIGN.md section 4), so the namespace is what keeps
two models, or two revisions, apart. The same keys are shown to change LMCache's verdict in
tests/engine/test_lmcache_invariants.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from render import find, helm_bin, render, render_docs

from kvtier import paths
from kvtier.engine_rig import rendered

CPU = paths.ROOT / "values" / "cpu.yaml"
NAMESPACE_DIR = re.compile(r"(?P<mount>/.*)/(?P<name>[a-z0-9-]+)\.(?P<digest>[0-9a-f]{12})")


@pytest.fixture(autouse=True)
def _helm(need) -> None:
    need(helm_bin(3).exists(), "pinned Helm not built: run `make tools`")


def namespaces(set_values: dict[str, Any] | None = None, values: list[Path] | None = None) -> dict[str, str]:
    """Model name -> the namespace directory in its LMCache config."""
    docs = render_docs("kv-tiered-inference", values=values or [CPU], set_values=set_values)
    result = {}
    for config_map in find(docs, "ConfigMap"):
        data = (config_map.get("data") or {}).get("lmcache.yaml")
        if data:
            # remote_url's directory, or the L2 plugin's base path (cache.l2.integrity, recordHits)
            directory = rendered.l2_path(yaml.safe_load(data))
            match = NAMESPACE_DIR.fullmatch((directory or "").rstrip("/"))
            assert match, directory
            result[config_map["metadata"]["labels"]["kv-tiered-inference/model"]] = (
                match["name"] + "." + match["digest"]
            )
    return result


def test_namespace_is_stable_and_named_after_the_model() -> None:
    first, second = namespaces(), namespaces()
    assert first == second
    assert first["qwen2-05b"].startswith("qwen2-05b.")


@pytest.mark.parametrize(
    "key, value",
    [
        ("models[0].model", "Qwen/Qwen2.5-0.5B-Instruct"),  # another model behind the same name
        ("models[0].source.huggingface.revision", "abc123"),  # a new revision
        ("models[0].dtype", "float32"),
        ("cache.chunkSize", 128),
        ("cache.hashAlgorithm", "sha256"),
        ("cache.lmcacheVersion", "0.5.6"),
        ("engine.accelerator", "nvidia"),
        ("cache.l2.namespaceSalt", "weights-2026-12"),
    ],
)
def test_every_validity_input_changes_the_namespace(key: str, value: Any) -> None:
    assert namespaces({key: value}) != namespaces()


@pytest.mark.parametrize(
    "key, value",
    [
        ("models[0].replicas", 3),  # scaling keeps the cache
        ("models[0].source.huggingface.tokenSecret.name", "hf-token"),  # credentials are not identity
        ("engine.cpuKVCacheSpace", "3Gi"),  # L0 size does not change a chunk
        ("cache.l2.eviction.highWatermark", "90%"),
    ],
)
def test_settings_that_keep_chunks_valid_keep_the_namespace(key: str, value: Any) -> None:
    assert namespaces({key: value}) == namespaces()


def test_pvc_models_at_one_path_in_different_claims_get_different_namespaces(tmp_path: Path) -> None:
    # Same model argument (/models/llm) from two claims: LMCache would key both the same.
    overlay = tmp_path / "pvc.yaml"

    def model(name: str, claim: str) -> dict[str, Any]:
        return {
            "name": name,
            "model": "llm",
            "source": {"pvc": {"claimName": claim, "path": "llm"}},
            "replicas": 1,
            "dtype": "bfloat16",
            "resources": {"limits": {"memory": "8Gi"}},
        }

    overlay.write_text(yaml.safe_dump({"models": [model("a", "weights-v1"), model("b", "weights-v2")]}))
    found = namespaces(values=[CPU, overlay])
    assert found["a"].split(".")[1] != found["b"].split(".")[1]


def test_tensor_parallel_above_one_is_refused_on_cpu() -> None:
    result = render("kv-tiered-inference", values=[CPU], set_values={"models[0].gpusPerReplica": 2})
    assert result.returncode != 0
    assert "engine.accelerator is cpu" in result.stderr and "gpusPerReplica" in result.stderr


NATIVE = {"cache.backend": "vllm-native", "cache.hashAlgorithm": "sha256"}


def native_tiers(set_values: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Model name -> the fs tier its engines render (cache.backend vllm-native)."""
    docs = render_docs("kv-tiered-inference", values=[CPU], set_values={**NATIVE, **(set_values or {})})
    result = {}
    for deployment in find(docs, "Deployment"):
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        if "--kv-transfer-config" not in args:
            continue
        transfer = yaml.safe_load(args[args.index("--kv-transfer-config") + 1])
        [tier] = transfer["kv_connector_extra_config"]["secondary_tiers"]
        result[deployment["metadata"]["labels"]["kv-tiered-inference/model"]] = tier
    return result


def native_namespaces(set_values: dict[str, Any] | None = None) -> dict[str, str]:
    """Model name -> the namespace directory its vLLM fs tier is rooted in (cache.backend vllm-native)."""
    result = {}
    for model, tier in native_tiers(set_values).items():
        root = Path(tier["root_dir"])
        assert root.parent == Path("/mnt/l2cache"), root
        result[model] = root.name
    return result


def test_the_native_backend_has_namespaces_of_its_own() -> None:
    native = native_namespaces()
    assert native["qwen2-05b"].startswith("qwen2-05b.") and native != namespaces()


@pytest.mark.parametrize(
    "key, value",
    [
        ("cache.vllmVersion", "0.33.0"),  # the fs tier's files carry no format version
        ("models[0].source.huggingface.revision", "abc123"),  # nor does vLLM's digest know the weights
        ("cache.hashAlgorithm", "xxhash"),
        ("cache.chunkSize", 512),
        ("models[0].dtype", "float32"),
    ],
)
def test_every_native_validity_input_changes_the_namespace(key: str, value: Any) -> None:
    assert native_namespaces({key: value}) != native_namespaces()


def test_native_sealed_chunk_files_have_a_tier_and_a_namespace_of_their_own() -> None:
    """cache.l2.integrity with vllm-native: the chart's sealed tier (l2_native.py, a trailer page per file)
    in a namespace of its own; off, vLLM's own `fs` tier in the namespace of before 0.9."""
    sealed, plain = native_tiers(), native_tiers({"cache.l2.integrity": False})
    assert {(t["type"], t.get("module_path")) for t in sealed.values()} == {
        ("KvtierSealedFsTier", "l2_native")
    }
    assert {(t["type"], t.get("module_path")) for t in plain.values()} == {("fs", None)}
    assert native_namespaces() != native_namespaces({"cache.l2.integrity": False})


def test_sealed_chunk_files_have_a_namespace_of_their_own() -> None:
    # cache.l2.integrity's files carry a trailer: verifying engines would refuse every file of before, and
    # engines of the previous revision keep their own namespace during a rollout.
    plain = namespaces({"cache.l2.integrity": False})
    assert plain != namespaces()
    assert namespaces({"cache.l2.integrity": False, "cache.l2.eviction.recordHits": True}) == plain


def test_the_lmcache_namespace_ignores_the_vllm_version() -> None:
    # LMCache's namespaces are what they were before backends existed: its chunks survive the upgrade.
    assert namespaces({"cache.vllmVersion": "0.33.0"}) == namespaces()
