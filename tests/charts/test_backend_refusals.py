"""The chart's cache-backend refusals (backendCheck, templates/_cache.tpl) over every combination of target,
backend, hash algorithm, L1 and hit recording, against what each backend can do, stated here from upstream:
the HyperPod operator renders LMCache's connector only; vLLM's fs tier moves every chunk through its CPU tier;
the hit recorder is an LMCache storage plugin; LMCache's pre_caching_hash_algorithm takes builtin, sha256,
sha256_cbor or sha256_cbor_64bit and vLLM's --prefix-caching-hash-algo sha256, sha256_cbor, xxhash or
xxhash_cbor. Helm (the pinned Helm 3) must refuse exactly the combinations that break one of these, naming
a rule the combination breaks."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from render import helm_bin, render

from kvtier import paths

BASES = {
    "standalone": paths.VALUES / "prod-g6e-4xlarge.yaml",
    "hyperpod": paths.VALUES / "hyperpod-g6e-4xlarge.yaml",
}
LMCACHE_HASHES = {"builtin", "sha256", "sha256_cbor", "sha256_cbor_64bit"}
VLLM_HASHES = {"sha256", "sha256_cbor", "xxhash", "xxhash_cbor"}
COMBINATIONS = list(
    itertools.product(
        BASES, ("lmcache", "vllm-native"), ("builtin", "sha256", "xxhash"), (True, False), (True, False)
    )
)


@pytest.fixture(autouse=True)
def _helm(need) -> None:
    need(helm_bin(3).exists(), "pinned Helm not built: run `make tools`")


def _broken(target: str, backend: str, algorithm: str, l1: bool, record_hits: bool) -> set[str]:
    """The rules a combination breaks (L2 is on in both environments)."""
    if backend == "lmcache":
        return set() if algorithm in LMCACHE_HASHES else {"backend-hash-algorithm"}
    broken = set() if algorithm in VLLM_HASHES else {"backend-hash-algorithm"}
    if target == "hyperpod":
        broken.add("backend-target")
    if not l1:
        broken.add("backend-l2-needs-l1")
    if record_hits:
        broken.add("backend-record-hits")
    return broken


def _overlay(backend: str, algorithm: str, l1: bool, record_hits: bool) -> dict[str, Any]:
    return {
        "cache": {
            "backend": backend,
            "hashAlgorithm": algorithm,
            "l1": {"enabled": l1},
            "l2": {"eviction": {"recordHits": record_hits}},
        }
    }


@pytest.mark.parametrize(("target", "backend", "algorithm", "l1", "record_hits"), COMBINATIONS)
def test_the_chart_refuses_exactly_what_a_backend_cannot_do(
    tmp_path: Path, target: str, backend: str, algorithm: str, l1: bool, record_hits: bool
) -> None:
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(yaml.safe_dump(_overlay(backend, algorithm, l1, record_hits)))
    result = render("kv-tiered-inference", values=[BASES[target], overlay])
    broken = _broken(target, backend, algorithm, l1, record_hits)
    if not broken:
        assert result.returncode == 0, result.stderr[-800:]
        return
    assert result.returncode != 0, f"rendered although it breaks {sorted(broken)}"
    named = re.search(r"\[([a-z0-9-]+)\] ", result.stderr)
    assert named and named.group(1) in broken, f"breaks {sorted(broken)}; helm: {result.stderr[-600:]}"
