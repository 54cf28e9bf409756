"""Cross-pod invariants checked on what the chart renders (DESIGN.md section 4).

The values rules check the settings; this checks the result: every engine container gets a fixed
PYTHONHASHSEED, the same one everywhere; every rendered LMCache config agrees on the keys that name
chunks, and each model's L2 directory is its own under one mount; and engines serving the same model agree
on image, dtype, KV dtype and parallelism. With vLLM's native offloading the same holds for the rendered
--kv-transfer-config: one chunk size, spec and prefix hash everywhere, one fs-tier directory per model. What
LMCache keys on is upstream/lmcache_key.py, what vLLM's fs tier keys on upstream/vllm_offload.py (measured).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import yaml

from kvtier.manifests import containers, pod_templates, subject
from kvtier.podscripts import l2_native
from kvtier.upstream import vllm_args
from kvtier.validate.findings import LMCACHE
from kvtier.validate.layers import configs
from kvtier.validate.rules import Hit, ManifestsContext, rule

CROSSPOD = "cross-pod (rendered)"
# Keys every rendered LMCache config must share (the chunk hash chain); remote_url is per model (namespaces).
LMCACHE_SHARED_KEYS = ("chunk_size", "pre_caching_hash_algorithm", "save_unfull_chunk")
SAME_MODEL_FLAGS = ("--dtype", "--kv-cache-dtype", "--tensor-parallel-size", "--pipeline-parallel-size")
# What every engine with vLLM's OffloadingConnector must share (its extra config, and the prefix hash flag).
NATIVE_SHARED_KEYS = ("spec_name", "block_size")
NATIVE_HASH_FLAG = "--prefix-caching-hash-algo"


def _env(c: dict[str, Any]) -> dict[str, Any]:
    return {str(e.get("name")): e.get("value") for e in c.get("env") or [] if isinstance(e, dict)}


def _argv(c: dict[str, Any]) -> list[str]:
    return [str(a) for a in (c.get("command") or []) + (c.get("args") or [])]


def engines(ctx: ManifestsContext) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(manifest, container) of every vLLM engine: `vllm serve` or an LMCache config in its env."""
    for m, _, spec in pod_templates(ctx.manifests):
        for _, _, c in containers(spec):
            argv = _argv(c)
            serving = any(a.endswith("vllm") for a in argv[:2]) and "serve" in argv
            if serving or "LMCACHE_CONFIG_FILE" in _env(c):
                yield m, c


@rule(
    "crosspod-rendered",
    scope="manifests",
    check_name=CROSSPOD,
    reason="pods share L2 chunks only if seed, chunking, hash, L2 directory and model settings are identical",
    remedy="set these once in the chart (cache:, models[]) and never per template; re-render",
)
def rendered_invariants(ctx: ManifestsContext) -> Iterator[Hit]:
    seeds: dict[str, str] = {}
    by_model: dict[str, tuple[str, dict[str, Any]]] = {}
    native = _NativeSeen()
    for m, c in engines(ctx):
        who = f"{subject(m)} container {c.get('name')}"
        seed = _env(c).get("PYTHONHASHSEED")
        if seed is None or not str(seed).isdigit():
            yield Hit(f"{who} has PYTHONHASHSEED {seed!r}: hashes differ per process", subject=subject(m))
        else:
            seeds[who] = str(seed)
        argv = _argv(c)
        view = vllm_args.read(argv)
        model = view.value("--served-model-name") or (
            argv[argv.index("serve") + 1] if "serve" in argv[:-1] else ""
        )
        facts = {"image": c.get("image"), **{f: view.value(f) for f in SAME_MODEL_FLAGS}}
        if model in by_model and by_model[model][1] != facts:
            first, other = by_model[model]
            diff = {k: (other[k], v) for k, v in facts.items() if other[k] != v}
            yield Hit(f"{who} serves {model} like {first} but differs in {diff}", subject=subject(m))
        by_model.setdefault(model, (who, facts))
        yield from _native_config(view, model, who, subject(m), native)
    if len(set(seeds.values())) > 1:
        yield Hit(f"engine containers disagree on PYTHONHASHSEED: {seeds}")
    if len({repr(v) for v in native.shared.values()}) > 1:
        yield Hit(f"engines disagree on the native offloading's {NATIVE_SHARED_KEYS}: {native.shared}")
    for root, models in native.roots.items():
        if len(models) > 1:
            yield Hit(f"engines of different models share the fs tier directory {root}: {sorted(models)}")
    rendered: dict[str, dict[str, Any]] = {}
    urls: dict[str, str] = {}
    for where, text in configs.find_files(ctx.manifests, LMCACHE):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            yield Hit(f"{where} is not YAML: {error}", subject=where)
            continue
        rendered[where] = (
            {k: (data or {}).get(k) for k in LMCACHE_SHARED_KEYS} if isinstance(data, dict) else {}
        )
        if isinstance(data, dict) and data.get("remote_url"):
            urls[where] = str(data["remote_url"])
    if len({repr(v) for v in rendered.values()}) > 1:
        yield Hit(f"LMCache configs disagree on {', '.join(LMCACHE_SHARED_KEYS)}: {rendered}")
    # Two models in one L2 directory share keys whenever their model argument, TP and dtype agree.
    shared = {url for url in urls.values() if list(urls.values()).count(url) > 1}
    if shared:
        yield Hit(f"LMCache configs of different models share an L2 directory {sorted(shared)}: {urls}")


class _NativeSeen:
    """What the engines with vLLM's native offloading rendered, gathered across them."""

    def __init__(self) -> None:
        self.shared: dict[str, dict[str, Any]] = {}  # who -> its shared keys
        self.roots: dict[str, set[str]] = {}  # fs tier root_dir -> served models


def _native_config(
    view: vllm_args.Argv, model: str, who: str, where: str, seen: _NativeSeen
) -> Iterator[Hit]:
    text = view.value("--kv-transfer-config")
    if text is None:
        return
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        yield Hit(f"{who} --kv-transfer-config is not JSON: {error}", subject=where)
        return
    if not isinstance(config, dict) or config.get("kv_connector") != "OffloadingConnector":
        return
    extra = config.get("kv_connector_extra_config") or {}
    seen.shared[who] = {k: extra.get(k) for k in NATIVE_SHARED_KEYS} | {"hash": view.value(NATIVE_HASH_FLAG)}
    for tier in extra.get("secondary_tiers") or []:
        if l2_native.is_fs_tier(tier):
            seen.roots.setdefault(str(tier.get("root_dir")), set()).add(model)
