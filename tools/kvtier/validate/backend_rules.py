"""Rules of the cache backend (cache.backend): what each backend can do, on which target, with which settings.

The chart refuses the same combinations at render time (templates/_cache.tpl, `backendCheck`); these say it
with the key's line and before anything renders. Facts about vLLM's native offloading are in
kvtier.upstream.vllm_offload (docs/backends.md).
"""

from __future__ import annotations

from collections.abc import Iterator

from kvtier.upstream import vllm_offload
from kvtier.validate.rules import Hit, ValuesContext, rule
from kvtier.validate.values_rules import lookup

NATIVE = "vllm-native"
LMCACHE_HASHES = ("builtin", "sha256", "sha256_cbor", "sha256_cbor_64bit")


def backend(ctx: ValuesContext) -> str:
    return str(lookup(ctx.values, "cache", "backend", default="lmcache"))


def _native(ctx: ValuesContext) -> bool:
    return backend(ctx) == NATIVE


@rule(
    "backend-target",
    reason="the HyperPod Inference Operator renders the engines itself and knows only LMCache's connector: "
    "vLLM's native offloading cannot be configured through it",
    remedy="use cache.backend: lmcache on target hyperpod, or target: standalone for vllm-native",
)
def backend_target(ctx: ValuesContext) -> Iterator[Hit]:
    if _native(ctx) and lookup(ctx.values, "target") == "hyperpod":
        yield Hit(
            "cache.backend vllm-native on target hyperpod: the operator renders LMCache's connector only",
            ("cache", "backend"),
        )


@rule(
    "backend-l2-needs-l1",
    reason="vLLM's fs tier is a secondary tier of the CPU tier: every chunk is written from, and read into, "
    "a CPU-tier slot, so there is no L2 without L1",
    remedy="set cache.l1.enabled: true with cache.backend vllm-native (or turn L2 off)",
)
def l2_needs_l1(ctx: ValuesContext) -> Iterator[Hit]:
    if not _native(ctx) or not lookup(ctx.values, "cache", "l2", "enabled", default=True):
        return
    if not lookup(ctx.values, "cache", "l1", "enabled", default=True):
        yield Hit("cache.l1.enabled is false while the native backend's L2 is on", ("cache", "l1", "enabled"))


@rule(
    "backend-record-hits",
    reason="the L2 hit recorder is an LMCache storage plugin: vLLM's native fs tier never loads it, so "
    "eviction would wait for hit records that never come",
    remedy="set cache.l2.eviction.recordHits: false with cache.backend vllm-native (eviction then goes by "
    "write time)",
)
def record_hits(ctx: ValuesContext) -> Iterator[Hit]:
    if _native(ctx) and lookup(ctx.values, "cache", "l2", "eviction", "recordHits", default=False):
        yield Hit(
            "cache.l2.eviction.recordHits is true with cache.backend vllm-native",
            ("cache", "l2", "eviction", "recordHits"),
        )


@rule(
    "backend-hash-algorithm",
    reason="cache.hashAlgorithm names the backend's prefix hash: LMCache's pre_caching_hash_algorithm or "
    "vLLM's --prefix-caching-hash-algo; each refuses the other's names at start",
    remedy="with lmcache use builtin, sha256, sha256_cbor or sha256_cbor_64bit; with vllm-native use sha256 "
    "(vLLM's default), sha256_cbor, xxhash or xxhash_cbor",
)
def hash_algorithm(ctx: ValuesContext) -> Iterator[Hit]:
    algorithm = lookup(ctx.values, "cache", "hashAlgorithm")
    allowed = vllm_offload.HASH_ALGORITHMS if _native(ctx) else LMCACHE_HASHES
    if isinstance(algorithm, str) and algorithm not in allowed:
        yield Hit(
            f"cache.hashAlgorithm {algorithm} is not one of {backend(ctx)}'s: {', '.join(allowed)}",
            ("cache", "hashAlgorithm"),
        )


@rule(
    "backend-vllm-version",
    reason="vLLM's fs tier exists from 0.23.0; cache.vllmVersion is part of each model's L2 namespace (the "
    "files carry no format version), so it must be the release the engine image runs",
    remedy="run vLLM >= 0.23.0 and set cache.vllmVersion to the engine image's vLLM release",
)
def vllm_version(ctx: ValuesContext) -> Iterator[Hit]:
    if not _native(ctx):
        return
    declared = str(lookup(ctx.values, "cache", "vllmVersion", default=""))
    release = vllm_offload.version_key(declared)
    if release is not None and release < vllm_offload.FS_TIER_SINCE:
        least = ".".join(map(str, vllm_offload.FS_TIER_SINCE))
        yield Hit(f"cache.vllmVersion {declared} has no fs tier (vLLM >= {least})", ("cache", "vllmVersion"))
    tag = str(lookup(ctx.values, "engine", "image", "tag", default=""))
    in_tag = vllm_offload.version_key(tag)  # "v1.2.3", "1.2.3-cu128", ...
    repository = str(lookup(ctx.values, "engine", "image", "repository", default=""))
    # Only the vLLM project's own images carry vLLM's release in their tag (LMCache's carry LMCache's).
    tagged = ".".join(map(str, in_tag)) if in_tag else ""
    if tagged and repository.startswith("vllm/") and tagged != declared:
        yield Hit(
            f"engine.image.tag {tag} runs vLLM {tagged} while cache.vllmVersion is {declared}",
            ("cache", "vllmVersion"),
            severity="warning",
        )


@rule(
    "backend-accelerator",
    reason="vLLM's offloading worker copies KV with CUDA or XPU only: on vLLM's CPU build it refuses to "
    'start ("CPU Offloading is currently only supported on CUDA-alike and XPU GPUs", vLLM 0.32)',
    remedy="on engine.accelerator cpu use cache.backend lmcache, or an engine image that carries a CPU copy "
    "for vLLM's offloading (this project's offload-cpu-copy stand-in, for test rigs)",
)
def backend_accelerator(ctx: ValuesContext) -> Iterator[Hit]:
    if _native(ctx) and lookup(ctx.values, "engine", "accelerator") == "cpu":
        yield Hit(
            "cache.backend vllm-native with engine.accelerator cpu: stock vLLM refuses to offload from CPU",
            ("cache", "backend"),
            severity="warning",
        )
