"""The L2 directory as files: what a scan finds there, and removing a scanned file only while it is unchanged.

Used by l2_evict.py (the chart's CronJob runs it from the podscripts ConfigMap, where this file sits beside
it; the toolkit imports both). Standard library only, Python >= 3.9.

Layouts (LMCache 0.5.x `fs_connector.py`; vLLM 0.32 `vllm/v1/kv_offload/file_mapper.py`, `tiering/fs/io.py`):
- LMCache writes a chunk to `<key>.tmp` (or to `<tmp dir>/<key>.data` with `fs_connector_relative_tmp_dir`)
  and renames it to `<key>.data` in the directory it is given: the umbrella gives each model its own
  namespace directory, `<model name>.<12 hex>` under the L2 root. Chunks are the `*.data` files at the top
  level and directly inside a namespace;
- vLLM's `fs` tier writes each chunk to `<name>_<random>.tmp` and renames it to
  `<root>/<model>_<12 hex>_r<rank>/<3 hex>/<2 hex>_g<group>/<hash>.bin`, with
  `<root>/<model>_<12 hex>/config.json` beside; the chart roots it in the model's namespace. Chunks are the
  `*.bin` files at exactly that place; `config.json` and temp files are never chunks.
- The L2 warm-up records which chunk files each warmed prefix produced in a pin file,
  `<namespace>/.kvtier-warm/<prefix>.json` (PIN_DIR): neither a chunk nor a temp file, counted as other bytes.

Temp files: every writer above writes a temp file and renames it, so a writer that dies mid-write (its pod
killed, its node lost) or whose cleanup fails (an EIO from the storage) leaves one behind that nobody will
ever rename. The scan lists the ones in the root and in live namespaces (`temps`, is_temp_file) for the
eviction to reclaim once stale; those in any other top-level directory are counted, never listed.

Safety: links are never followed (directories are opened with O_NOFOLLOW and files are removed relative to
them), so a directory swapped for a symlink after the scan cannot lead a removal outside the root; a file
whose inode, size or mtime changed since the scan was rewritten and is kept; files vanishing meanwhile are
reported as such, not errors.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

FINAL_SUFFIX = ".data"
TEMP_SUFFIX = ".tmp"
# The warm-up's pin files, one per warmed prefix, directly inside a namespace directory.
PIN_DIR = ".kvtier-warm"
# A warmed prefix's name (cache.warmup.prefixes.<model>.<name>), also its pin file's name: never a path.
PREFIX_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
# A final chunk of vLLM's fs tier, relative to its root (the namespace directory).
NATIVE_CHUNK = re.compile(r"[^/]+_[0-9a-f]{12}_r[0-9]+/[0-9a-f]{3}/[0-9a-f]{2}_g[0-9]+/[0-9a-f]+\.bin")
# The umbrella's L2 namespace directories (kv-tiered-inference.l2Namespace): a DNS-label model name, a dot,
# 12 hex digits. A dot never occurs in a model name, so no other directory matches.
NAMESPACE_DIR = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\.[0-9a-f]{12}")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0)


@dataclass(frozen=True)
class Chunk:
    """A file as seen by the scan: `namespace` is its directory below the root ("" for the root itself)."""

    namespace: str
    name: str
    size: int
    mtime_ns: int
    atime_ns: int
    inode: int

    @property
    def relpath(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def last_use_ns(self) -> int:
        return max(self.mtime_ns, self.atime_ns)


@dataclass
class Namespace:
    """What one dead namespace directory holds (every file, temp files included)."""

    files: list[Chunk] = field(default_factory=list)
    newest_use_ns: int = 0


@dataclass
class Scan:
    """What the L2 directory holds: candidates (final chunks of live namespaces), dead namespaces, and
    everything else that uses space."""

    chunks: list[Chunk] = field(default_factory=list)
    chunk_bytes: int = 0
    temp_files: int = 0
    temp_bytes: int = 0
    # The writers' temp files in the root and in live namespaces: reclaimable once stale (l2_evict).
    temps: list[Chunk] = field(default_factory=list)
    other_bytes: int = 0
    dead: dict[str, Namespace] = field(default_factory=dict)
    dead_bytes: int = 0

    @property
    def used_bytes(self) -> int:
        return self.chunk_bytes + self.temp_bytes + self.other_bytes + self.dead_bytes


def _entries(dir_fd: int) -> Iterable[os.DirEntry]:
    try:
        return list(os.scandir(dir_fd))
    except FileNotFoundError:
        return []


def _walk_files(root_fd: int, relative: str) -> Iterable[tuple[str, os.stat_result]]:
    """(path below `relative`, stat) of every regular file under the directory, links never followed."""
    try:
        fd = os.open(relative, _DIR_FLAGS, dir_fd=root_fd)
    except OSError:  # gone, or not a directory any more
        return
    try:
        for entry in _entries(fd):
            if entry.is_dir(follow_symlinks=False):
                for below, below_info in _walk_files(fd, entry.name):
                    yield f"{entry.name}/{below}", below_info
            elif entry.is_file(follow_symlinks=False):
                try:  # a stat per file only: each is a metadata round trip on the FUSE mount
                    info = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                yield entry.name, info
    finally:
        os.close(fd)


def scan(directory: str, live: set[str] | None = None) -> Scan:
    """Measure the directory without following links. `live` None: every namespace is live."""
    result = Scan()
    root_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for entry in _entries(root_fd):
            if entry.is_dir(follow_symlinks=False):
                is_namespace = NAMESPACE_DIR.fullmatch(entry.name) is not None
                dead = is_namespace and live is not None and entry.name not in live
                for relative, info in _walk_files(root_fd, entry.name):
                    _count(result, entry.name, relative, info, is_namespace, dead)
            elif entry.is_file(follow_symlinks=False):
                try:
                    info = os.stat(entry.name, dir_fd=root_fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                _count(result, "", entry.name, info, True, False)
    finally:
        os.close(root_fd)
    return result


def _count(
    result: Scan, namespace: str, relative: str, info: os.stat_result, is_chunk_dir: bool, dead: bool
) -> None:
    chunk = Chunk(namespace, relative, info.st_size, info.st_mtime_ns, info.st_atime_ns, info.st_ino)
    if dead:
        held = result.dead.setdefault(namespace, Namespace())
        held.files.append(chunk)
        # Reading a pin file (l2_evict does, every run) moves its atime: only its write is a use.
        used_ns = chunk.mtime_ns if relative.startswith(PIN_DIR + "/") else chunk.last_use_ns
        held.newest_use_ns = max(held.newest_use_ns, used_ns)
        result.dead_bytes += chunk.size
    elif is_chunk_dir and is_chunk_file(relative):
        result.chunks.append(chunk)
        result.chunk_bytes += chunk.size
    elif namespace and is_chunk_dir and relative.startswith(PIN_DIR + "/"):
        result.other_bytes += chunk.size  # pin files: kept, and not a write in flight
    elif relative.endswith(TEMP_SUFFIX) or not is_chunk_dir or "/" in relative:
        # LMCache's temp files, its relative tmp dir, and any directory that is not a namespace: writes
        # in flight or someone else's files, counted and never touched.
        result.temp_files += 1
        result.temp_bytes += chunk.size
        if is_chunk_dir and is_temp_file(relative):
            result.temps.append(chunk)
    else:
        result.other_bytes += chunk.size


def is_chunk_file(relative: str) -> bool:
    """A final chunk, by its path below a namespace: LMCache's flat `*.data`, or vLLM's fs tier layout."""
    if "/" not in relative:
        return relative.endswith(FINAL_SUFFIX)
    return NATIVE_CHUNK.fullmatch(relative) is not None


def is_temp_file(relative: str) -> bool:
    """A writer's temp file, by its path below the root or a namespace: a `*.tmp` anywhere (LMCache's
    `<key>.tmp`, vLLM's `<name>_<random>.tmp`, l2_blocks' `<final>_<n>.tmp`), or a `*.data` in a
    subdirectory, which only LMCache's relative tmp dir holds (its chunks sit directly in the namespace)."""
    return relative.endswith(TEMP_SUFFIX) or ("/" in relative and relative.endswith(FINAL_SUFFIX))


class Remover:
    """Removes files below the root relative to directory descriptors opened without following links,
    so a directory swapped for a symlink after the scan cannot lead the removal outside the root."""

    def __init__(self, directory: str, dry_run: bool) -> None:
        self.root_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        self.dry_run = dry_run

    def close(self) -> None:
        os.close(self.root_fd)

    def _parent(self, chunk: Chunk) -> tuple[int, str]:
        parts = chunk.relpath.split("/")
        fd = os.dup(self.root_fd)
        try:
            for part in parts[:-1]:
                below = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = below
        except BaseException:
            os.close(fd)
            raise
        return fd, parts[-1]

    def remove_unchanged(self, chunk: Chunk) -> str:
        """Remove the file if it is still the one scanned (inode, size, mtime), through one opening of its
        directory: "removed", "rewritten" (kept: changed, or its directory is no longer ours) or
        "vanished" (gone already)."""
        try:
            fd, name = self._parent(chunk)
        except FileNotFoundError:
            return "vanished"
        except OSError:
            return (
                "rewritten"  # a link or a file where the directory was (ENOTDIR, ELOOP): not ours to follow
            )
        try:
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                return "vanished"
            if (info.st_ino, info.st_size, info.st_mtime_ns) != (chunk.inode, chunk.size, chunk.mtime_ns):
                return "rewritten"
            if not self.dry_run:
                try:
                    os.unlink(name, dir_fd=fd)
                except FileNotFoundError:
                    return "vanished"
            return "removed"
        finally:
            os.close(fd)

    def prune(self, namespace: str) -> None:
        """Remove an emptied dead namespace directory tree (bottom up); anything still in it stays."""
        if self.dry_run:
            return
        for below in _subdirs(self.root_fd, namespace):
            with contextlib.suppress(OSError):  # not empty (an old replica wrote again) or gone
                os.rmdir(below, dir_fd=self.root_fd)


def _subdirs(root_fd: int, namespace: str) -> list[str]:
    """The namespace directory and the directories below it, deepest first."""
    found = [namespace]
    try:
        fd = os.open(namespace, _DIR_FLAGS, dir_fd=root_fd)
    except OSError:
        return []
    try:
        for entry in _entries(fd):
            if entry.is_dir(follow_symlinks=False):
                found = [f"{namespace}/{d}" for d in _subdirs(fd, entry.name)] + found
    finally:
        os.close(fd)
    return found
