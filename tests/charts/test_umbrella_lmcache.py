"""The rendered LMCache config of every model in every environment loads with LMCache's own loader
(`LMCacheEngineConfig.from_file`, PyPI lmcache) without a warning; tiers switch off cleanly; L1 `auto`
is derived from the memory limit and refused when it cannot fit."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from render import find, helm_bin, render, render_docs

from kvtier import helm, paths
from kvtier.engine_rig import rendered

CHART = paths.CHARTS / "kv-tiered-inference"
STANDALONE = [
    f
    for f in [*sorted(paths.VALUES.glob("*.yaml")), *sorted((CHART / "ci").glob("*-values.yaml"))]
    if (yaml.safe_load(f.read_text()) or {}).get("target", "standalone") == "standalone"
    # vLLM's native backend renders no LMCache file (test_the_native_backend_renders_no_lmcache_file)
    and ((yaml.safe_load(f.read_text()) or {}).get("cache") or {}).get("backend", "lmcache") == "lmcache"
]


@pytest.fixture(autouse=True)
def _deps(need) -> None:
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    helm.build_dependencies(CHART)


@pytest.fixture
def lmcache(need):
    try:
        import lmcache.v1.config  # noqa: F401
    except ImportError:
        need(False, "PyPI lmcache not installed (pip install --no-deps lmcache; plus pyyaml, requests)")
    from kvtier.upstream import lmcache_config

    return lmcache_config


def lmcache_maps(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in find(docs, "ConfigMap") if "lmcache.yaml" in (d.get("data") or {})]


def values_file(tmp_path: Path, **top: Any) -> Path:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(top))
    return path


@pytest.mark.parametrize("values", [None, *STANDALONE], ids=lambda p: p.name if p else "defaults")
def test_every_rendered_config_loads_cleanly_with_lmcache(values: Path | None, lmcache) -> None:
    docs = render_docs(CHART, values=[values] if values else [])
    spec = yaml.safe_load(values.read_text()) if values else {}
    cache = spec.get("cache") or {}
    tiers_on = (cache.get("l1") or {}).get("enabled", True) or (cache.get("l2") or {}).get("enabled", True)
    maps = lmcache_maps(docs)
    assert len(maps) == (len(spec.get("models") or [None]) if tiers_on else 0)
    for config_map in maps:
        source = f"ConfigMap/{config_map['metadata']['name']}"
        check = lmcache.inspect_text(config_map["data"]["lmcache.yaml"], source)
        assert check.findings == [], check.findings
        # LMCache read back what the chart meant (nothing fell back to a default).
        assert check.values["chunk_size"] == cache.get("chunkSize", 256)
        assert check.values["local_cpu"] == (cache.get("l1") or {}).get("enabled", True)
        assert check.values["max_local_cpu_size"] >= 1


def test_the_checker_catches_an_unknown_key(lmcache) -> None:
    """The loader check can fail: a misspelt key is a finding, not a silent default."""
    text = "chunk_size: 256\nlocal_cpu: true\nmax_local_cpu_size: 4\nremote_serdes: naive\n"
    findings = lmcache.check_text(text, "ConfigMap/x:lmcache.yaml")
    assert len(findings) == 1 and "remote_serdes" in findings[0] and "ConfigMap/x:lmcache.yaml" in findings[0]


def test_the_checker_reports_bad_values_and_ignores_the_environment(lmcache, monkeypatch) -> None:
    bad = lmcache.check_text("chunk_size: lots\n", "x")
    assert len(bad) == 1 and "chunk_size" in bad[0]
    # An LMCACHE_* variable in the checking process must not mask a problem in the file.
    monkeypatch.setenv("LMCACHE_CHUNK_SIZE", "256")
    assert lmcache.check_text("chunk_size: lots\n", "x") == bad
    good = lmcache.inspect_text("chunk_size: 512\nlocal_cpu: false\nmax_local_cpu_size: 2\n")
    assert good.ok and good.values == {"chunk_size": 512, "local_cpu": False, "max_local_cpu_size": 2.0}


def test_l1_auto_is_limit_minus_shm_minus_headroom(tmp_path: Path) -> None:
    docs = render_docs(CHART)  # 110Gi limit, 8Gi /dev/shm, 16Gi headroom
    (config_map,) = lmcache_maps(docs)
    assert yaml.safe_load(config_map["data"]["lmcache.yaml"])["max_local_cpu_size"] == 86
    docs = render_docs(CHART, values=[values_file(tmp_path, cache={"l1": {"size": 12.5}})])
    assert yaml.safe_load(lmcache_maps(docs)[0]["data"]["lmcache.yaml"])["max_local_cpu_size"] == 12.5


@pytest.mark.parametrize(
    ("set_values", "message"),
    [
        ({"cache.l1.headroom": "104Gi"}, "leaves -2.0 GiB for L1"),
        ({"engine.shmSize": "100Gi"}, "leaves -6.0 GiB for L1"),
    ],
)
def test_l1_auto_that_cannot_fit_is_refused(set_values: dict[str, Any], message: str) -> None:
    result = render(CHART, set_values=set_values)
    assert result.returncode != 0
    assert message in result.stderr and "models[qwen2-7b]" in result.stderr


def test_l1_auto_without_a_memory_limit_is_refused(tmp_path: Path) -> None:
    model = yaml.safe_load((CHART / "values.yaml").read_text())["models"][0]
    model["resources"] = {"requests": {"cpu": "1", "memory": "8Gi"}}
    result = render(CHART, values=[values_file(tmp_path, models=[model])])
    assert result.returncode != 0
    assert "needs resources.limits.memory" in result.stderr


def test_l2_off_renders_no_claim_no_remote_and_no_eviction(lmcache) -> None:
    docs = render_docs(CHART, set_values={"cache.l2.enabled": False})
    assert not find(docs, "PersistentVolumeClaim")
    assert not find(docs, "CronJob")
    text = lmcache_maps(docs)[0]["data"]["lmcache.yaml"]
    assert "remote_url" not in text and lmcache.check_text(text) == []
    engine = next(
        d
        for d in find(docs, "Deployment")
        if d["metadata"]["labels"]["app.kubernetes.io/component"] == "engine"
    )
    pod = engine["spec"]["template"]["spec"]
    assert "l2cache" not in {v["name"] for v in pod["volumes"]}
    test_pods = [d["metadata"]["name"] for d in find(docs, "Pod")]
    assert not [n for n in test_pods if "crosspod" in n or "l2-files" in n]


def test_l1_off_keeps_l2_through_the_cpu_buffer(lmcache) -> None:
    docs = render_docs(CHART, set_values={"cache.l1.enabled": False})
    config = yaml.safe_load(lmcache_maps(docs)[0]["data"]["lmcache.yaml"])
    assert config["local_cpu"] is False
    directory = rendered.l2_path(config) or ""
    assert re.fullmatch(r"/mnt/curvine/l2cache/qwen2-7b\.[0-9a-f]{12}/?", directory), directory


def test_l1_and_l2_off_drop_lmcache_entirely() -> None:
    docs = render_docs(CHART, values=[CHART / "ci" / "tiers-off-values.yaml"])
    assert not lmcache_maps(docs)
    engine = next(
        d
        for d in find(docs, "Deployment")
        if d["metadata"]["labels"]["app.kubernetes.io/component"] == "engine"
    )
    vllm = engine["spec"]["template"]["spec"]["containers"][0]
    assert "--kv-transfer-config" not in vllm["args"] and "--enable-prefix-caching" in vllm["args"]
    assert "LMCACHE_CONFIG_FILE" not in {e["name"] for e in vllm["env"]}


def test_l0_off_disables_prefix_caching() -> None:
    docs = render_docs(CHART, set_values={"cache.l0.enabled": False})
    engine = next(
        d
        for d in find(docs, "Deployment")
        if d["metadata"]["labels"]["app.kubernetes.io/component"] == "engine"
    )
    args = engine["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--no-enable-prefix-caching" in args and "--enable-prefix-caching" not in args


def test_the_native_backend_renders_no_lmcache_file() -> None:
    docs = render_docs(CHART, values=[paths.VALUES / "prod-native-g6e-4xlarge.yaml"])
    assert lmcache_maps(docs) == []
    [engine] = [
        d
        for d in find(docs, "Deployment")
        if d["metadata"]["labels"]["app.kubernetes.io/component"] == "engine"
    ]
    container = engine["spec"]["template"]["spec"]["containers"][0]
    assert not any(e["name"].startswith("LMCACHE_") for e in container["env"])
    assert not any(v["name"] == "lmcache-config" for v in engine["spec"]["template"]["spec"]["volumes"])
