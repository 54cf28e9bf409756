"""What decides whether one engine pod can use another's L2 chunks: LMCache 0.5.5's chunk key and where its
fs connector looks (lmcache/utils.py CacheEngineKey; storage_backend/connector/fs_connector.py).

The key is `<model argument>@<world size>@<worker id>@<chunk hash>@<KV dtype>`, the chunk hash is a chain
over the prompt's tokens in `chunk_size` steps with the prefix hash function, seeded (when vLLM is
importable, as in every pod) from vLLM's NONE_HASH, which depends on PYTHONHASHSEED; the file lives in the
remote_url directory. Measured, not read: tests/engine/test_lmcache_invariants.py stores in one process and
looks up in another for a change of each entry below and asserts a miss for every KEYED entry and a hit for
every NOT_KEYED one, so this table cannot drift from LMCache.
"""

from __future__ import annotations

# Each entry: what must be identical across pods -> the rendered setting that carries it.
KEYED = {
    "model argument": "`vllm serve <model>` (the path or id given to vLLM, not --served-model-name)",
    "world size": "--tensor-parallel-size",
    "worker id": "the tensor-parallel rank of the worker (each rank stores and reads its own chunks)",
    "KV dtype": "--dtype (or --kv-cache-dtype)",
    "chunk size": "LMCache chunk_size (cache.chunkSize)",
    "prefix hash": "LMCache pre_caching_hash_algorithm (cache.hashAlgorithm)",
    "hash seed": "PYTHONHASHSEED (cache.hashSeed)",
    "L2 directory": "the directory of LMCache remote_url (cache.l2.mountPath + the model's namespace)",
}

# Settings people expect to matter that LMCache does not key on (a pod differing here still hits).
NOT_KEYED = {
    "serde": "LMCache remote_serde (naive and kivi store the same bytes)",
    "served model name": "--served-model-name",
    "URL host and port": "the placeholder host:port of remote_url",
    "mount path": "where the volume is mounted, as long as remote_url reaches the same directory",
}
