"""One LMCache engine in its own process, as one engine pod would run it: LMCache's own LMCacheEngine, token
database, L1 backend and fs connector, configured from the chart's rendered LMCache file and the pod's
model argument, world size and dtype, on a synthetic paged KV cache in vLLM CPU's layout (copied with the
lmcache-cpu-copy stand-in). Runs in the engine venv (vLLM importable, so PYTHONHASHSEED counts as in a pod):

    .venv-engine/bin/python tests/harness/engine/lmcache_probe.py CASES.json

CASES: a JSON list; each case {"action": "store"|"lookup", "config": path of lmcache.yaml or, for a pod whose
LMCache reads LMCACHE_* variables (HyperPod's), "env": {name: value}, "model_arg",
"served_model_name", "world_size", "worker_id", "dtype", "layers", "kv_heads", "head_size", "tokens": [...],
"kv_seed", "pythonpath": optional list (the pod's PYTHONPATH), "fault": optional "delete_after_lookup" or,
for a store, "close_during_l2_write" (the chart plugin's chunk writes start 2 s late and the engine closes
once every one has started, as a pod's shutdown would; "stored_files" then counts what landed by the time
the close returned),
"skip_prefix": optional n, a multiple of the chunk size: store only past the first n tokens, as vLLM does
past a prefix it already stored} runs on a fresh
engine (its own L1), one after another in this process (one PYTHONHASHSEED).
`store` writes the chunks of `tokens` (KV drawn from kv_seed) and waits until each chunk's L2 write has
landed or failed ("stored_files", "failed_puts") and no remote backend has a write in flight (with the
chart's plugin and a remote_url both configured, one L2 can land before the other: the engine must not
close under the other's writes); `lookup` asks
how many leading tokens LMCache would serve, retrieves them and compares with the KV kv_seed gives. Prints
one JSON line per case: {"hit_tokens", "retrieved_tokens", "data_ok", "lookup_after", "error"}.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from lmcache.v1.cache_engine import LMCacheEngineBuilder
from lmcache.v1.config import LMCacheEngineConfig
from lmcache.v1.metadata import LMCacheMetadata
from lmcache_cpu_copy.connector import CPUPagedKVConnector

BLOCK_SIZE = 128
LATE_WRITE_S = 2.0  # fault close_during_l2_write: how late each plugin chunk write starts


def paged_kv(request: dict[str, Any], tokens: int, fill: bool) -> list[torch.Tensor]:
    """One tensor per layer in vLLM CPU's layout, holding `tokens` tokens in slots 0..tokens-1."""
    dtype = getattr(torch, request["dtype"])
    blocks = -(-tokens // BLOCK_SIZE) + 1
    shape = (blocks, request["kv_heads"], BLOCK_SIZE, 2 * request["head_size"])
    generator = torch.Generator().manual_seed(int(request["kv_seed"]))
    return [
        torch.randn(shape, generator=generator).to(dtype) if fill else torch.zeros(shape, dtype=dtype)
        for _ in range(request["layers"])
    ]


def engine_for(request: dict[str, Any], chunk_size: int, config: LMCacheEngineConfig) -> Any:
    metadata = LMCacheMetadata(
        model_name=request["model_arg"],
        served_model_name=request.get("served_model_name"),
        world_size=int(request["world_size"]),
        local_world_size=int(request["world_size"]),
        worker_id=int(request.get("worker_id", 0)),
        local_worker_id=int(request.get("worker_id", 0)),
        kv_dtype=getattr(torch, request["dtype"]),
        kv_shape=(request["layers"], 2, chunk_size, request["kv_heads"], request["head_size"]),
    )
    connector = CPUPagedKVConnector(request["layers"], request["kv_heads"], request["head_size"])
    engine = LMCacheEngineBuilder.get_or_create(
        "probe", config, metadata, connector, lambda tensor, _src: tensor, lambda obj, _src: obj
    )
    engine.post_init()
    return engine


def l2_dir(config: LMCacheEngineConfig) -> Path:
    """remote_url's directory, or the fs connector plugin's base path (the chart's recordHits form)."""
    if config.remote_url:
        return Path(str(config.remote_url).removeprefix("fs://localhost:0"))
    extra = config.extra_config or {}
    (base,) = [
        v for k, v in extra.items() if k.startswith("remote_storage_plugin.") and k.endswith(".base_path")
    ]
    return Path(base)


def failed_puts(engine: Any) -> int:
    """How many L2 writes LMCache's remote backends have given up on (each failed chunk counts once)."""
    backends = engine.storage_manager.storage_backends.values()
    return sum(getattr(backend, "_put_failed_count", 0) for backend in backends)


def puts_in_flight(engine: Any) -> int:
    """How many L2 writes LMCache's remote backends have submitted and not finished (RemoteBackend.put_tasks,
    which a write leaves only when its task is done)."""
    backends = engine.storage_manager.storage_backends.values()
    return sum(len(getattr(backend, "put_tasks", ())) for backend in backends)


def wait_for_puts(
    engine: Any, config: LMCacheEngineConfig, before: tuple[int, int], chunks: int
) -> tuple[int, int]:
    """Wait (60 s at most) until each of `chunks` asynchronous L2 writes has landed as a chunk file or failed
    and no backend has a write in flight; how many landed and how many failed. `before`: chunk files and
    failed writes before the store."""
    files_before, failed_before = before
    deadline = time.monotonic() + 60
    while True:
        landed = len(list(l2_dir(config).glob("*.data"))) - files_before
        failed = failed_puts(engine) - failed_before
        settled = landed + failed >= chunks and puts_in_flight(engine) == 0
        if settled or time.monotonic() > deadline:
            return landed, failed
        time.sleep(0.1)


@contextlib.contextmanager
def late_plugin_writes(delay_s: float) -> Iterator[threading.Semaphore]:
    """The chart plugin's chunk writer (l2_connector.write_sealed, from the pod's PYTHONPATH) starts each
    write `delay_s` late, in its writer thread, as on a busy node; yields a semaphore released as each
    write enters its thread."""
    import l2_connector

    write = l2_connector.write_sealed
    entered = threading.Semaphore(0)

    def late(*args: Any) -> None:
        entered.release()
        time.sleep(delay_s)
        write(*args)

    l2_connector.write_sealed = late
    try:
        yield entered
    finally:
        l2_connector.write_sealed = write


def config_of(request: dict[str, Any]) -> LMCacheEngineConfig:
    """The pod's LMCache configuration: its file, or LMCache's own reading of its environment (`env`, set
    for this case only)."""
    if "env" not in request:
        return LMCacheEngineConfig.from_file(request["config"])
    saved = dict(os.environ)
    os.environ.update(request["env"])
    try:
        return LMCacheEngineConfig.from_env()
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_case(request: dict[str, Any]) -> dict[str, Any]:
    action = request["action"]
    for entry in request.get("pythonpath", []):  # as the pod's PYTHONPATH would
        if entry not in sys.path:
            sys.path.insert(0, entry)
    config = config_of(request)
    tokens = torch.tensor(request["tokens"], dtype=torch.long)
    slots = torch.arange(len(tokens), dtype=torch.long)
    engine = engine_for(request, config.chunk_size, config)
    result: dict[str, Any] = {"hit_tokens": 0, "retrieved_tokens": 0, "data_ok": None, "error": None}
    closing = request.get("fault") == "close_during_l2_write"
    files_before = len(list(l2_dir(config).glob("*.data")))
    try:
        if action == "store":
            skip = int(request.get("skip_prefix", 0))
            mask = torch.arange(len(tokens)) >= skip if skip else None
            before = files_before, failed_puts(engine)
            chunks = (len(tokens) - skip) // config.chunk_size
            with late_plugin_writes(LATE_WRITE_S) if closing else contextlib.nullcontext() as entered:
                engine.store(
                    tokens, mask=mask, kvcaches=paged_kv(request, len(tokens), fill=True), slot_mapping=slots
                )
                if entered is not None:  # the pod shuts down while every chunk is being written
                    for _ in range(chunks):
                        if not entered.acquire(timeout=60):
                            raise TimeoutError("the plugin's chunk writes never started")
                    LMCacheEngineBuilder.destroy("probe")
                    engine = None
                    result["stored_files"] = len(list(l2_dir(config).glob("*.data"))) - files_before
                    return result
            result["stored_files"], result["failed_puts"] = wait_for_puts(engine, config, before, chunks)
        else:
            hit = int(engine.lookup(tokens))
            result["hit_tokens"] = hit
            if request.get("fault") == "delete_after_lookup":  # eviction racing a reader
                for path in l2_dir(config).glob("*.data"):
                    path.unlink()
            if hit:
                caches = paged_kv(request, len(tokens), fill=False)
                mask = engine.retrieve(tokens[:hit], kvcaches=caches, slot_mapping=slots[:hit])
                retrieved = int(mask.sum())
                result["retrieved_tokens"] = retrieved
                truth = paged_kv(request, len(tokens), fill=True)
                full_blocks = retrieved // BLOCK_SIZE
                result["data_ok"] = retrieved > 0 and all(
                    torch.equal(got[:full_blocks], want[:full_blocks])
                    for got, want in zip(caches, truth, strict=True)
                )
        # The engine still answers after whatever happened above.
        result["lookup_after"] = int(engine.lookup(tokens))
    except Exception as error:  # the verdict is the output: a failed read is a finding, not a crash
        result["error"] = f"{type(error).__name__}: {error}"
        result["traceback"] = traceback.format_exc()[-1500:]
    finally:
        if engine is not None:  # not destroyed above
            LMCacheEngineBuilder.destroy("probe")
    return result


if __name__ == "__main__":
    for case in json.loads(Path(sys.argv[1]).read_text()):
        print(json.dumps(run_case(case)), flush=True)
