"""The bundle's sealed fs tier for vLLM's native offloading (cache.backend vllm-native, cache.l2.integrity).

vLLM's `fs` secondary tier (vllm/v1/kv_offload/tiering/fs, 0.32) reads a chunk file back with one readv and
checks only its length: a file whose bytes changed but whose size did not is loaded into the CPU tier as KV.
This tier is vLLM's own (`FileSystemTierManager`: its file names, lookups, thread pool, O_DIRECT probe and
job bookkeeping) with the two I/O calls replaced:

- a store writes the KV and one trailer page (l2_integrity.page_trailer) to a temp file and renames it
  over the chunk's name, as vLLM's store does;
- a load checks the file's size (KV + one page) before reading, reads KV and trailer in one readv, and
  checks the digest. A failure is what vLLM's own short read is: the chunks before it in the job are kept,
  it and those after it are misses that vLLM recomputes (kv_load_failure_policy recompute), and the file
  is removed so the next store writes a good one. It is logged with its file and why, with this
  process's running counts.

Each chunk is its own task on the tier's thread pool (vLLM's tier queues one task per job), so a prompt's
chunks are read and hashed side by side.

vLLM loads it without a patch, by name from the tier's config (SecondaryTierFactory's out-of-tree path):

    secondary_tiers: [{type: KvtierSealedFsTier, module_path: l2_native, root_dir: <L2 namespace>}]

The engine pods import it from the chart's podscripts ConfigMap (PYTHONPATH). The class is built on first
access (PEP 562), so this file imports without vLLM (the toolkit has none).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any

try:
    from . import l2_blocks, l2_integrity
except ImportError:  # in the engine pod: a top-level module beside l2_blocks.py and l2_integrity.py
    import l2_blocks  # type: ignore[no-redef]
    import l2_integrity  # type: ignore[no-redef]

CLASS_NAME = "KvtierSealedFsTier"
MODULE = "l2_native"
PAGE = l2_integrity.PAGE_BYTES

log = logging.getLogger("kvtier.l2")


def _slots(view: memoryview, offsets: list[int], size: int) -> list[memoryview]:
    """The chunk slots `view[offset:offset + size]`; a slot past the buffer's end is an error, not the
    shorter slice Python's slicing would give (vLLM's own I/O checks the same)."""
    flat = view.cast("B")
    for offset in offsets:
        if offset < 0 or offset + size > len(flat):
            raise ValueError(
                f"chunk slot at {offset} ({size} bytes) is outside the {len(flat)}-byte CPU tier"
            )
    return [flat[offset : offset + size] for offset in offsets]


def store_blocks(
    root: str, paths: list[str], view: memoryview, offsets: list[int], size: int, o_direct: int
) -> None:
    """Store each chunk `view[offset:offset + size]` sealed at its path (vLLM's batch_store_block's job)."""
    for path, block in zip(paths, _slots(view, offsets, size), strict=True):
        l2_blocks.store_block(path, os.path.relpath(path, root), block, o_direct)


def load_blocks(
    root: str,
    paths: list[str],
    view: memoryview,
    offsets: list[int],
    size: int,
    o_direct: int,
    rejections: l2_integrity.Rejections,
) -> None:
    """Load each chunk into `view[offset:offset + size]`, in order, stopping at the first that fails with an
    OSError whose `num_succeeded` is how many loaded before it (what vLLM's tier keeps, as after its own
    failed reads). A chunk that fails verification is logged, counted and removed."""
    for i, (path, block) in enumerate(zip(paths, _slots(view, offsets, size), strict=True)):
        try:
            why = l2_blocks.load_block(path, os.path.relpath(path, root), block, o_direct)
            if why is not None:
                l2_blocks.reject(path, why, rejections)
                raise OSError(f"L2 chunk {path} failed verification ({why})")
        except OSError as error:
            error.num_succeeded = i  # type: ignore[attr-defined]
            raise


def is_fs_tier(tier: Any) -> bool:
    """Whether a rendered secondary tier config is an fs tier rooted in an L2 namespace: vLLM's `fs`, or
    this sealed one as the chart names it."""
    if not isinstance(tier, dict):
        return False
    return tier.get("type") == "fs" or (tier.get("type"), tier.get("module_path")) == (CLASS_NAME, MODULE)


def _build_tier_class() -> type:
    from vllm.v1.kv_offload.tiering.fs.io import O_DIRECT
    from vllm.v1.kv_offload.tiering.fs.manager import FileSystemTierManager

    class KvtierSealedFsTier(FileSystemTierManager):  # type: ignore[misc, valid-type]
        """vLLM's fs tier with sealed chunk files (see the module docstring)."""

        # vLLM's fs tier's keys, spelled out so vLLM's factory (and the validator's probe, which binds the
        # rendered keys to this signature) refuses an unknown one as it does for `fs`
        def __init__(
            self,
            offloading_spec: Any,
            primary_kv_view: memoryview,
            tier_type: str,
            root_dir: str,
            n_read_threads: int = 16,
            n_write_threads: int = 16,
            enable_kv_events: bool = False,
            locality: str | None = None,
            backpressure_detector: Any = None,
        ) -> None:
            super().__init__(
                offloading_spec,
                primary_kv_view,
                tier_type,
                root_dir=root_dir,
                n_read_threads=n_read_threads,
                n_write_threads=n_write_threads,
                enable_kv_events=enable_kv_events,
                locality=locality,
                backpressure_detector=backpressure_detector,
            )
            self.root_dir = root_dir
            self.rejections = l2_integrity.Rejections()
            self._failures_lock = threading.Lock()
            # What the two overrides below share with vLLM's tier.
            missing = l2_blocks.missing_state(
                self,
                ("_pool", "_primary_kv_view", "_block_size", "_use_o_direct", "file_mapper", "events"),
                ("_store_job_keys", "_load_job_keys", "_job_block_counts", "_load_progress"),
            )
            if missing:
                raise RuntimeError(
                    f"{CLASS_NAME}: this vLLM's FileSystemTierManager has no {', '.join(missing)}; "
                    "the sealed tier is built on vLLM 0.32's: run an engine image of that release "
                    "(cache.vllmVersion), or set cache.l2.integrity false"
                )
            log.info("%s: sealed chunk files under %s (one trailer page per chunk)", CLASS_NAME, root_dir)

        def _o_direct(self) -> int:
            return O_DIRECT if self._use_o_direct else 0

        # One pool task per chunk where vLLM's tier makes one per job: the pool's threads then read and hash
        # a prompt's chunks side by side (BLAKE3 and the I/O release the GIL), so the check adds about one
        # chunk's hash to a load instead of one per chunk.
        def submit_store(self, job_metadata: Any) -> None:
            keys = list(job_metadata.keys)
            if self.events is not None:
                self._store_job_keys[job_metadata.job_id] = keys
            paths = [self.file_mapper.get_file_name(key) for key in keys]
            offsets = [int(cid) * self._block_size for cid in job_metadata.chunk_ids]
            view, size, o_direct = self._primary_kv_view, self._block_size, self._o_direct()

            def store_task(path: str, offset: int) -> Callable[[], None]:
                return lambda: store_blocks(self.root_dir, [path], view, [offset], size, o_direct)

            tasks = [store_task(path, offset) for path, offset in zip(paths, offsets, strict=True)]
            tasks = tasks or [lambda: None]  # a job of no task would never finish
            self._job_block_counts[job_metadata.job_id] = len(keys)
            self._pool.enqueue_store(job_metadata.job_id, len(tasks), tasks)

        def submit_load(self, job_metadata: Any) -> None:
            job_id = job_metadata.job_id
            keys = list(job_metadata.keys)
            self._load_job_keys[job_id] = keys
            self._job_block_counts[job_id] = len(keys)
            paths = [self.file_mapper.get_file_name(key) for key in keys]
            offsets = [int(cid) * self._block_size for cid in job_metadata.chunk_ids]
            view, size, o_direct = self._primary_kv_view, self._block_size, self._o_direct()

            def load_task(index: int, path: str, offset: int) -> Callable[[], None]:
                def load() -> None:
                    try:
                        load_blocks(self.root_dir, [path], view, [offset], size, o_direct, self.rejections)
                    except OSError:
                        # vLLM's get_finished_jobs keeps the chunks before the first that failed: written
                        # before this task's task_done, so before the job can be seen finished
                        with self._failures_lock:
                            first = self._load_progress.get(job_id, index)
                            self._load_progress[job_id] = min(first, index)
                        raise

                return load

            tasks = [
                load_task(i, path, offset)
                for i, (path, offset) in enumerate(zip(paths, offsets, strict=True))
            ]
            tasks = tasks or [lambda: None]
            self._pool.enqueue_load(job_id, len(tasks), tasks)

    return KvtierSealedFsTier


def __getattr__(name: str) -> Any:
    if name == CLASS_NAME:
        cls = _build_tier_class()
        globals()[CLASS_NAME] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
