"""What decides whether one engine pod can use another's chunks in vLLM's native fs tier, at the pinned vLLM
(toolchain/versions.env, 0.32): the `OffloadingConnector` with `TieringOffloadingSpec` and an `fs` secondary
tier (vllm/v1/kv_offload/tiering/, vllm/v1/kv_offload/file_mapper.py).

A chunk's file is `<root_dir>/<model argument, '/' -> '_'>_<12 hex>_r<rank>/<hash[:3]>/<hash[3:5]>_g<group>/
<hash>.bin`. The 12 hex digits are a SHA-256 over a JSON of the model argument, tokens per hash block, blocks
per file, the KV cache dtype, each KV cache group's layer names and block size, and the TP/PP/PCP/DCP sizes
(forced to 1, and the rank to 0, when vLLM calls the layout parallelism-agnostic: a single full-attention
group whose KV heads split evenly over the ranks); `<hash>` is the prefix-cache hash of the chunk's last
block: `--prefix-caching-hash-algo` over (parent hash, tokens, extra keys), its chain seeded by NONE_HASH,
which PYTHONHASHSEED sets when set (and a fixed string otherwise, for the sha256 algorithms).

Measured, not read: tests/engine/test_native_invariants.py computes the files of one prompt's chunks with
vLLM's own FileMapper and block hash, in separate processes that differ in one setting each, and asserts a
different file for every KEYED entry and the same file for every NOT_KEYED one, so this table cannot drift
from vLLM.
"""

from __future__ import annotations

import re

_RELEASE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")

# Each entry: what must be identical across pods -> the rendered setting that carries it.
KEYED = {
    "model argument": "`vllm serve <model>` (the path or id given to vLLM, not --served-model-name)",
    "KV dtype": "--dtype (or --kv-cache-dtype)",
    "chunk size": "block_size of the offloading config (cache.chunkSize)",
    "engine block size": "--block-size (the chunk's blocks per file and the KV cache groups' block size)",
    "layers": "the model's attention layers (names and count: another architecture or depth)",
    "prefix hash": "--prefix-caching-hash-algo (cache.hashAlgorithm)",
    "hash seed": "PYTHONHASHSEED (cache.hashSeed)",
    "L2 directory": "root_dir of the fs tier (cache.l2.mountPath + the model's namespace)",
}

# Settings people expect to matter that vLLM's fs tier does not key on (a pod differing here still finds the
# file). The chart keeps the first three in each model's L2 namespace anyway (docs/backends.md): a file of
# other weights, another vLLM release or another TP layout would be read as a hit.
NOT_KEYED = {
    "weights": "the model's weights and revision (only the model argument is in the digest)",
    "vLLM version": "the vLLM release (the files carry no format version)",
    "tensor parallel size": "--tensor-parallel-size, when the layout is parallelism-agnostic (one "
    "full-attention group)",
    "served model name": "--served-model-name",
    "CPU tier size": "cpu_bytes_to_use (cache.l1.size)",
    "I/O threads": "the fs tier's n_read_threads and n_write_threads",
}

# The first vLLM release whose TieringOffloadingSpec has the `fs` tier type (vLLM PR #43600, from llm-d's
# filesystem connector, llm-d-kv-cache PR #1859); 0.22 had it as `fs_python` only.
FS_TIER_SINCE = (0, 23, 0)
# Each chunk is one file of blocks_per_chunk pages, its size rounded up to the page (O_DIRECT alignment;
# vllm/v1/kv_offload/tiering/fs: the CPU tier's chunk rows are page-aligned).
PAGE_BYTES = 4096
# The hash functions --prefix-caching-hash-algo accepts (vllm/config/cache.py PrefixCachingHashAlgo).
HASH_ALGORITHMS = ("sha256", "sha256_cbor", "xxhash", "xxhash_cbor")
# Those whose NONE_HASH seed is random per process without PYTHONHASHSEED (vllm/v1/core/kv_cache_utils.py).
RANDOM_SEED_WITHOUT_PYTHONHASHSEED = ("xxhash", "xxhash_cbor")


def chunk_file_bytes(chunk_tokens: int, kv_bytes_per_token: int) -> int:
    """Bytes of one fs-tier file (and one CPU-tier slot): the chunk's KV rounded up to the page."""
    raw = chunk_tokens * kv_bytes_per_token
    return -(-raw // PAGE_BYTES) * PAGE_BYTES


def version_key(text: str) -> tuple[int, int, int] | None:
    """(major, minor, patch) of a release string such as "0.32.0" or "v0.23.1rc1"; None if it is not one."""
    found = _RELEASE.match(text.strip())
    return (int(found[1]), int(found[2]), int(found[3])) if found else None
