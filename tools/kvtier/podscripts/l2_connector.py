"""The bundle's LMCache storage plugin for the shared L2: LMCache's fs connector plus what the chart asks.

- `verify` (cache.l2.integrity): every chunk file it writes is sealed with a checksum trailer and every
  chunk it reads is checked (l2_integrity.py). A chunk that fails is a miss, never KV: it is logged with
  its file and why, counted, and removed, so the next store of that chunk writes a good one. vLLM then
  recomputes the tokens (kv_load_failure_policy recompute, which the chart sets).
- `hit_interval_s` (cache.l2.eviction.recordHits): each chunk served from L2 gets its atime set, for the
  eviction job's least-recently-used order (l2_hits.py).
- Every chunk read or write it starts finishes before LMCache frees the CPU memory it copies from or into
  (InFlightIO): the pinned LMCache frees that memory when the engine closes (a pod's shutdown) without
  waiting for the file I/O already running in threads, which then touches unmapped memory
  (docs/reliability.md).

The engine pods import it from the chart's podscripts ConfigMap (PYTHONPATH); LMCache's plugin loader reads

    remote_storage_plugins: [kvtier_l2]
    extra_config:
      remote_storage_plugin.kvtier_l2.module_path: l2_connector
      remote_storage_plugin.kvtier_l2.class_name: KvtierFSConnector
      remote_storage_plugin.kvtier_l2.base_path: /mnt/curvine/l2cache/<namespace>
      remote_storage_plugin.kvtier_l2.verify: true
      remote_storage_plugin.kvtier_l2.hit_interval_s: 60       # only when hits are recorded

The class is built on first access (PEP 562), so this file imports without LMCache (the toolkit has none).
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from pathlib import Path
from typing import Any

try:
    from . import l2_hits, l2_integrity
except ImportError:  # in the engine pod: a top-level module beside l2_hits.py and l2_integrity.py
    import l2_hits  # type: ignore[no-redef]
    import l2_integrity  # type: ignore[no-redef]

CLASS_NAME = "KvtierFSConnector"
MODULE = "l2_connector"
PLUGIN_NAME = "kvtier_l2"  # the name in remote_storage_plugins and in its extra_config keys
# How long an engine's close waits for running chunk reads and writes: inside the 15 s that LMCache's vLLM
# connector gives the whole engine destroy at shutdown (lmcache/v1/manager.py, the pinned release).
DRAIN_TIMEOUT_S = 10.0

log = logging.getLogger("kvtier.l2")


def _option(extra: dict[str, Any], name: str, default: Any) -> Any:
    return extra.get(f"remote_storage_plugin.{PLUGIN_NAME}.{name}", default)


def _flag(value: Any) -> bool:
    """LMCache's YAML loader keeps YAML booleans; a quoted "false" must not turn verification on."""
    return value if isinstance(value, bool) else str(value).strip().lower() in ("1", "true", "yes", "on")


def read_sealed(
    path: Path, key: str, header_bytes: int, declared: Any, allocate: Any
) -> tuple[Any, str | None]:
    """Read one sealed chunk file: (the memory object, None), or (None, why it is refused; None when
    memory was short, a miss that says nothing about the file).

    `declared(header)` is the KV length the header gives (ValueError: not a header); `allocate(header)` the
    memory object to read the KV into. The file's size must be header + KV + trailer before anything is
    allocated, so a damaged length field cannot ask for a huge buffer. One open, so header, KV and
    trailer come from one file even while a writer renames a new one over it."""
    with open(path, "rb") as f:
        rest = os.fstat(f.fileno()).st_size - header_bytes
        header = f.read(header_bytes)
        if len(header) != header_bytes:
            return None, l2_integrity.SHORT
        try:
            length = declared(header)
        except ValueError:
            return None, l2_integrity.MISMATCH
        if rest == length:
            return None, l2_integrity.UNSEALED
        if rest != length + l2_integrity.TRAILER_BYTES:
            cut = rest < length + l2_integrity.TRAILER_BYTES  # the KV or its trailer cut short
            return None, l2_integrity.SHORT if cut else l2_integrity.MISMATCH
        memory_obj = allocate(header)
        if memory_obj is None:
            return None, None
        buffer = memory_obj.byte_array
        try:
            got = f.readinto(buffer)
            tail = f.read(l2_integrity.TRAILER_BYTES + 1)
            why = (
                l2_integrity.SHORT if got != len(buffer) else l2_integrity.problem(key, header, buffer, tail)
            )
        except BaseException:
            memory_obj.ref_count_down()
            raise
    if why is not None:
        memory_obj.ref_count_down()
        return None, why
    return memory_obj, None


def own_temp(temp: Path) -> Path:
    """A temp name of this write's own beside LMCache's `temp` (`<key>.tmp`, or `<tmp dir>/<key>.data`), with
    its suffix, so the scans still skip it. LMCache's name is the same for every writer of a key: two pods
    storing one chunk at once would write into one file (neither a local filesystem nor Curvine, which has
    no single-writer lease, keeps them apart)."""
    return temp.with_name(f"{temp.stem}.{secrets.token_hex(8)}{temp.suffix}")


def write_sealed(final: Path, temp: Path, key: str, header: bytes, payload: Any) -> None:
    """Write header + payload + trailer to a temp file of its own (own_temp), then rename it over `final`
    (readers see whole files). A temp file that is not this write's own is never removed."""
    seal = l2_integrity.trailer(key, header, payload)
    mine = own_temp(temp)
    created = False
    try:
        with open(mine, "xb") as f:
            created = True
            f.write(header)
            f.write(payload)
            f.write(seal)
        os.replace(mine, final)
    except BaseException:
        if created:
            mine.unlink(missing_ok=True)
        raise


class InFlightIO:
    """The chunk reads and writes that have started and not finished, so whoever frees the memory they use
    can wait for them first; once draining has begun none may start."""

    def __init__(self) -> None:
        self._running = 0
        self._draining = False
        self._changed = threading.Condition()

    def begin(self) -> bool:
        """Count one about to start; False when draining has begun (it must not start)."""
        with self._changed:
            if self._draining:
                return False
            self._running += 1
            return True

    def end(self) -> None:
        with self._changed:
            self._running -= 1
            self._changed.notify_all()

    def drain(self, timeout_s: float) -> int:
        """Refuse new ones and wait up to `timeout_s` for the running ones; how many still run."""
        with self._changed:
            self._draining = True
            self._changed.wait_for(lambda: self._running == 0, timeout_s)
            return self._running


def free_after_io(local_cpu_backend: Any, in_flight: InFlightIO, timeout_s: float) -> None:
    """Make `local_cpu_backend.close()`, which frees LMCache's CPU memory (its memory objects with it), wait
    for `in_flight` first. LMCache's storage manager closes that backend before the remote ones, so the
    connector's own close() would come too late."""
    free = local_cpu_backend.close

    def close() -> None:
        still_running = in_flight.drain(timeout_s)
        if still_running:
            log.warning(
                "%s: %d L2 chunk read(s) or write(s) still running after %.0f s; freeing the memory anyway",
                PLUGIN_NAME,
                still_running,
                timeout_s,
            )
        free()

    local_cpu_backend.close = close


def _build_connector_class() -> type:
    from lmcache.v1.protocol import RemoteMetadata
    from lmcache.v1.storage_backend.connector.fs_connector import FSConnector

    class KvtierFSConnector(FSConnector):  # type: ignore[misc, valid-type]
        """LMCache's fs connector with sealed chunk files and recorded hits (see the module docstring)."""

        def __init__(self, loop: Any, local_cpu_backend: Any, config: Any) -> None:
            # LMCache's loader passes no plugin name to a connector class: the fs connector then reads its
            # base path under ours.
            super().__init__(loop, local_cpu_backend, config, plugin_name=PLUGIN_NAME)
            extra = getattr(config, "extra_config", None) or {}
            self.verify = _flag(_option(extra, "verify", False))
            interval = _option(extra, "hit_interval_s", None)
            self.hit_recorder = l2_hits.HitRecorder(float(interval)) if interval is not None else None
            self.rejections = l2_integrity.Rejections()
            self.in_flight = InFlightIO()
            free_after_io(local_cpu_backend, self.in_flight, DRAIN_TIMEOUT_S)
            if self.verify and not self.save_chunk_meta:
                raise ValueError(
                    f"{PLUGIN_NAME}: verify needs LMCache's chunk header (extra_config save_chunk_meta "
                    "true, LMCache's default): the checksum covers the header that says how long the KV is"
                )
            if self.verify and getattr(self, "use_odirect", False):
                log.warning(
                    "%s: verify reads and writes through the page cache; O_DIRECT is off", PLUGIN_NAME
                )
                self.use_odirect = False

        async def get(self, key: Any) -> Any:
            if not self.in_flight.begin():
                return None  # the engine is closing: a miss
            if self.verify:
                memory_obj = await self._in_thread(self._get_verified, key)
            else:
                try:
                    memory_obj = await super().get(key)
                finally:
                    self.in_flight.end()
            if memory_obj is not None and self.hit_recorder is not None:
                # touched off the request path; hit() logs its own failures
                self.loop.run_in_executor(None, self.hit_recorder.hit, str(self._get_file_path(key)))
            return memory_obj

        def _get_verified(self, key: Any) -> Any:
            path = self._get_file_path(key)

            def declared(header: bytes) -> int:
                try:
                    return int(RemoteMetadata.deserialize(header).length)
                except Exception as error:  # an unknown dtype or format code: bytes changed
                    raise ValueError(str(error)) from error

            def allocate(header: bytes) -> Any:
                meta = RemoteMetadata.deserialize(header)
                return self.local_cpu_backend.allocate(meta.shapes, meta.dtypes, meta.fmt)

            try:
                memory_obj, why = read_sealed(
                    path, key.to_string(), self.remote_metadata_bytes, declared, allocate
                )
            except FileNotFoundError:  # evicted or never written: a plain miss
                return None
            except Exception as error:  # an unreadable file or header: a miss, as LMCache's own read
                log.error("L2 chunk %s unreadable, served as a miss: %s", path, error)
                return None
            if why is not None:
                l2_integrity.dispose(str(path), why, self.rejections)
            return memory_obj

        async def put(self, key: Any, memory_obj: Any) -> None:
            if not self.verify:
                if self._may_start(key):
                    try:
                        await super().put(key, memory_obj)
                    finally:
                        self.in_flight.end()
                return
            final, temp = self._get_file_and_tmp_path(key)
            try:
                buffer = memory_obj.byte_array
                header = RemoteMetadata(
                    len(buffer),
                    memory_obj.get_shapes(),
                    memory_obj.get_dtypes(),
                    memory_obj.get_memory_format(),
                ).serialize()
                if self._may_start(key):
                    await self._in_thread(write_sealed, final, temp, key.to_string(), header, buffer)
            except Exception as error:
                log.error("Failed to write file %s: %s", final, error)
                raise

        def _may_start(self, key: Any) -> bool:
            """Count a chunk write about to start; False (logged) once the engine is closing."""
            if self.in_flight.begin():
                return True
            log.info("%s: the engine is closing, chunk %s not stored", PLUGIN_NAME, key.to_string())
            return False

        def _in_thread(self, function: Any, *args: Any) -> Any:
            """`function(*args)` in the loop's executor, for I/O already counted by in_flight.begin(); the
            thread itself ends it, so a cancelled caller's thread is still waited for before the free."""

            def run() -> Any:
                try:
                    return function(*args)
                finally:
                    self.in_flight.end()

            try:
                return self.loop.run_in_executor(None, run)
            except BaseException:
                self.in_flight.end()  # never handed to a thread
                raise

    return KvtierFSConnector


def __getattr__(name: str) -> Any:
    if name == CLASS_NAME:
        cls = _build_connector_class()
        globals()[CLASS_NAME] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
