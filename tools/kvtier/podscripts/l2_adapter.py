"""The bundle's sealed L2 adapter for LMCache's multi-process server (HyperPod MultiProcess mode).

In the operator's MultiProcess mode an LMCache server sidecar holds L1 and L2 and takes its L2 from
`--l2-adapter <JSON>`. LMCache's `fs` adapter (lmcache/v1/distributed/l2_adapters/fs_l2_adapter.py, in the
release the chart pins, cache.lmcacheVersion) writes a chunk as its bare KV and reads it back checking only
the length: a file whose bytes changed but whose size did not is loaded as KV. This adapter is LMCache's
own (`FSL2Adapter`: its file names, lookups, deletes, event fds and task bookkeeping) with store and load
replaced by l2_blocks' sealed files (the KV and one trailer page, l2_integrity.page_trailer, over the file's
name and the KV; temp files sit beside the chunk, and the read-ahead setting is not used):

- a store writes each chunk to a temp file and renames it over the chunk's name, as LMCache's does;
- a load checks each file's size (KV + one page) before reading, reads KV and trailer in one readv and
  checks the digest. A chunk that fails is not loaded (LMCache's server then treats it as a miss), and it
  is logged with its file and why, counted and removed, so the next store writes a good one. A task's
  chunks are read side by side on the event loop's executor.

LMCache's server loads it without a patch, through its `plugin` adapter type, from the chart's podscripts
ConfigMap (PYTHONPATH); the config class is found by LMCache's convention (<class name> + "Config"):

    --l2-adapter {"type": "plugin", "module_path": "l2_adapter", "class_name": "KvtierSealedFSL2Adapter",
                  "adapter_params": {"base_path": "<L2 namespace>"}}

Both classes are built on first access (PEP 562), so this file imports without LMCache (the toolkit has
none).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

try:
    from . import l2_blocks, l2_integrity
except ImportError:  # in the LMCache server pod: a top-level module beside l2_blocks.py and l2_integrity.py
    import l2_blocks  # type: ignore[no-redef]
    import l2_integrity  # type: ignore[no-redef]

CLASS_NAME = "KvtierSealedFSL2Adapter"
CONFIG_CLASS_NAME = CLASS_NAME + "Config"  # what LMCache's plugin factory looks for
MODULE = "l2_adapter"

log = logging.getLogger("kvtier.l2")


def adapter_argument(base_path: str) -> dict[str, Any]:
    """The `--l2-adapter` JSON object that loads this adapter on `base_path` (the chart renders the same)."""
    return {
        "type": "plugin",
        "module_path": MODULE,
        "class_name": CLASS_NAME,
        "adapter_params": {"base_path": base_path},
    }


def _build_classes() -> dict[str, type]:
    from lmcache.lmcache_native import Bitmap
    from lmcache.v1.distributed.internal_api import L2StoreResult
    from lmcache.v1.distributed.l2_adapters.fs_l2_adapter import FSL2Adapter, FSL2AdapterConfig

    class KvtierSealedFSL2AdapterConfig(FSL2AdapterConfig):  # type: ignore[misc, valid-type]
        """LMCache's fs adapter settings (base_path, relative_tmp_dir, read_ahead_size, use_odirect)."""

    class KvtierSealedFSL2Adapter(FSL2Adapter):  # type: ignore[misc, valid-type]
        """LMCache's fs L2 adapter with sealed chunk files (see the module docstring)."""

        def __init__(self, config: Any, **kwargs: Any) -> None:
            super().__init__(config)
            self.rejections = l2_integrity.Rejections()
            # What the overrides below share with LMCache's adapter.
            missing = l2_blocks.missing_state(
                self,
                ("_loop", "_lock", "_store_efd", "_load_efd", "_use_odirect", "_os_disk_bs"),
                ("_completed_store_tasks", "_completed_load_tasks"),
            )
            if missing:
                raise RuntimeError(
                    f"{CLASS_NAME}: this LMCache's FSL2Adapter has no {', '.join(missing)}; the sealed "
                    "adapter is built on the LMCache release the chart pins (cache.lmcacheVersion): run a "
                    "worker image of that release, or set cache.l2.integrity false"
                )
            log.info(
                "%s: sealed chunk files under %s (one trailer page per chunk)", CLASS_NAME, config.base_path
            )

        def _o_direct(self, size: int) -> int:
            """O_DIRECT where LMCache's adapter would use it: asked for, and the KV whole blocks."""
            aligned = self._os_disk_bs > 0 and size % self._os_disk_bs == 0
            return getattr(os, "O_DIRECT", 0) if self._use_odirect and aligned else 0

        def _store_one(self, key: Any, obj: Any) -> int:
            """Bytes of KV written for one chunk (0: it was there already)."""
            path = self._key_to_path(key)
            block = memoryview(obj.byte_array).cast("B")
            written = l2_blocks.store_block(str(path), path.name, block, self._o_direct(len(block)))
            return len(block) if written else 0

        def _load_one(self, key: Any, obj: Any) -> bool:
            """Whether one chunk loaded and verified; a failed one is refused (logged, counted, removed)."""
            path = self._key_to_path(key)
            block = memoryview(obj.byte_array).cast("B")
            try:
                why = l2_blocks.load_block(str(path), path.name, block, self._o_direct(len(block)))
            except FileNotFoundError:  # evicted since the lookup: a miss, as in LMCache's adapter
                return False
            except OSError:
                log.exception("%s failed to load %s", CLASS_NAME, path)
                return False
            if why is not None:
                l2_blocks.reject(str(path), why, self.rejections)
                return False
            return True

        async def _execute_store(self, keys: list[Any], objects: list[Any], task_id: Any) -> None:
            runs = [
                self._loop.run_in_executor(None, self._store_one, k, o)
                for k, o in zip(keys, objects, strict=True)
            ]
            results = await asyncio.gather(*runs, return_exceptions=True)
            stored, sizes, written, failed = [], [], 0, 0
            for key, result in zip(keys, results, strict=True):
                if isinstance(result, BaseException):
                    log.error("%s failed to store %s: %s", CLASS_NAME, self._key_to_path(key), result)
                    failed += 1
                elif result:
                    stored.append(key)
                    sizes.append(result + l2_blocks.PAGE)  # the file's size, for LMCache's byte totals
                    written += result
            if stored:
                self._notify_keys_stored(stored, sizes)
            with self._lock:
                self._completed_store_tasks[task_id] = L2StoreResult(failed == 0, written)
            self._store_efd.notify()

        async def _execute_load(self, keys: list[Any], objects: list[Any], task_id: Any) -> None:
            runs = [
                self._loop.run_in_executor(None, self._load_one, k, o)
                for k, o in zip(keys, objects, strict=True)
            ]
            results = await asyncio.gather(*runs)
            bitmap = Bitmap(len(keys))
            for i, loaded in enumerate(results):
                if loaded:
                    bitmap.set(i)
            loaded_keys = [key for key, loaded in zip(keys, results, strict=True) if loaded]
            if loaded_keys:
                self._notify_keys_accessed(loaded_keys)
            with self._lock:
                self._completed_load_tasks[task_id] = bitmap
            self._load_efd.notify()

    return {CLASS_NAME: KvtierSealedFSL2Adapter, CONFIG_CLASS_NAME: KvtierSealedFSL2AdapterConfig}


def __getattr__(name: str) -> Any:
    if name in (CLASS_NAME, CONFIG_CLASS_NAME):
        globals().update(_build_classes())
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
