"""Warnings about the cache backend (cache.backend) that a template cannot give.

What a backend refuses outright (on which target, without L1, with the hit recorder, with the other backend's
hash names) the chart refuses itself (templates/_cache.tpl, `backendCheck`; chart_rules.py declares the ids).
Facts about vLLM's native offloading are in kvtier.upstream.vllm_offload (docs/backends.md).
"""

from __future__ import annotations

from collections.abc import Iterator

from kvtier.upstream import vllm_offload
from kvtier.validate.rules import Hit, ValuesContext, rule
from kvtier.values import lookup

NATIVE = "vllm-native"


def _native(ctx: ValuesContext) -> bool:
    return str(lookup(ctx.values, "cache", "backend", default="lmcache")) == NATIVE


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
