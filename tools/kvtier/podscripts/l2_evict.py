#!/usr/bin/env python3
"""Keeps the shared filesystem L2 useful and under a high watermark.

Neither LMCache's filesystem connector nor vLLM's native `fs` offloading tier ever deletes anything, so the L2
directory grows until the volume is full.
This script, run by the umbrella chart's CronJob (and importable by the toolkit), does two things per run:

1. **Dead namespaces first.** With `--live FILE` (the namespace directories the chart renders for the
   models it deploys), every other namespace directory belongs to a configuration no replica runs any
   more (another model revision, chunk size, TP, dtype, LMCache version): its chunks can never hit again.
   Once nothing in it was used or written for `--dead-grace` seconds (a rollout in progress still uses
   the old one), its files, temp files included, are removed, whatever the watermarks say.
2. **Least recently used next.** When the directory holds more than the high watermark, final chunk files
   (LMCache's `*.data`, vLLM's `*.bin`) are removed, least recently *used* first, until it is at or below the
   low watermark.

    python3 l2_evict.py --dir D --high 85% --low 70% [--capacity 500Gi] [--min-age 120]
        [--live live-namespaces.txt --dead-grace 3600] [--order last-use|written]
        [--max-files 100000] [--max-seconds 600] [--dry-run]

Why these rules (LMCache 0.5.x `fs_connector.py`, docs/eviction.md):
- a chunk is written to `<key>.tmp` (or to `<tmp dir>/<key>.data` with `fs_connector_relative_tmp_dir`)
  and renamed to `<key>.data` in the directory LMCache is given: the umbrella gives each model its own
  namespace directory, `<model name>.<12 hex>` under the L2 root. Candidates are the `*.data` files at the
  top level and directly inside a namespace; a live namespace's file still being written is never touched
  (but counts towards the usage), nor is a chunk written less than `--min-age` seconds ago;
- vLLM's `fs` tier (vllm/v1/kv_offload/file_mapper.py and tiering/fs/io.py, vLLM 0.32) writes each chunk to
  `<name>_<random>.tmp` and renames it to
  `<root>/<model>_<12 hex>_r<rank>/<3 hex>/<2 hex>_g<group>/<hash>.bin`, with
  `<root>/<model>_<12 hex>/config.json` beside; the chart roots it in the model's namespace. Candidates are
  the `*.bin` files at exactly that place; `config.json` and temp files are never touched. Emptied hash
  directories stay (a writer may be about to rename into one);
- last use = the later of mtime (the write: a rename keeps it) and atime. Reads do not move atime on
  Curvine's FUSE mount (the kernel marks FUSE inodes S_NOATIME and Curvine's master changes atime only on
  an explicit setattr), so the engines' hit recorder (l2_hits.py) sets atime on each hit. Without it the
  order falls back to the write time;
- every lookup checks the file on disk, so a removed chunk is a clean miss on every replica (both backends;
  vLLM's tier caches a lookup's verdict for the request that asked, and a load that then fails is a miss).

Safety: nothing outside `--dir` is touched (directories are opened without following links and files are
removed relative to them); a file whose inode, size or mtime changed since the scan was rewritten and is
kept; files vanishing meanwhile (another run, an engine) are counted, not errors; each run removes at most
`--max-files` files and stops after `--max-seconds`. Prints one JSON report whose `summary` is one line;
exits 0 when the directory ends at or below the high watermark, 1 when it could not get there (young or
rewritten files, or a work bound hit), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Callable

OK, FINDINGS, USAGE = 0, 1, 2
FINAL_SUFFIX = ".data"
TEMP_SUFFIX = ".tmp"
# A final chunk of vLLM's fs tier, relative to its root (the namespace directory).
NATIVE_CHUNK = re.compile(r"[^/]+_[0-9a-f]{12}_r[0-9]+/[0-9a-f]{3}/[0-9a-f]{2}_g[0-9]+/[0-9a-f]+\.bin")
# The umbrella's L2 namespace directories (kv-tiered-inference.l2Namespace): a DNS-label model name, a dot,
# 12 hex digits. A dot never occurs in a model name, so no other directory matches.
NAMESPACE_DIR = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\.[0-9a-f]{12}")
REPORT_NAMES = 20  # evicted file names listed in the report (the counts and bytes cover all)
ORDERS = ("last-use", "written")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0)

_UNITS = {
    "": 1,
    "k": 10**3,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kKMGTP]i?|)B?\s*$")


class UsageError(ValueError):
    """A bad argument: the message says which and what was expected."""


def parse_size(text: str) -> int:
    """Bytes from a Kubernetes-style quantity: 123, 500Gi, 1.5T, 200G (decimal), 64Mi."""
    match = _SIZE.match(str(text))
    if not match or match.group(2) not in _UNITS:
        raise UsageError(f"size {text!r}: expected bytes or a quantity such as 500Gi, 1.5T, 200G")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def parse_watermark(text: str, capacity: int | None) -> int:
    """Bytes from a watermark: a percentage of the capacity ("85%") or a size ("400Gi")."""
    value = str(text).strip()
    if value.endswith("%"):
        try:
            percent = float(value[:-1])
        except ValueError:
            raise UsageError(f"watermark {text!r}: expected a percentage such as 85%") from None
        if not 0 < percent <= 100:
            raise UsageError(f"watermark {text!r}: a percentage must be in (0, 100]")
        if capacity is None:
            raise UsageError(
                f"watermark {text!r} is a percentage but the capacity is unknown: pass --capacity"
            )
        return int(capacity * percent / 100)
    return parse_size(value)


def read_live(path: str) -> set[str]:
    """The live namespace directory names: one per line, `#` comments and blank lines ignored."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        raise UsageError(
            f"--live {path!r}: {exc.strerror} (the chart mounts it from its ConfigMap)"
        ) from None
    names = {line.split("#", 1)[0].strip() for line in lines}
    names.discard("")
    bad = sorted(n for n in names if not NAMESPACE_DIR.fullmatch(n))
    if bad:
        raise UsageError(f"--live {path!r}: {bad[0]!r} is not a namespace directory name (<model>.<12 hex>)")
    return names


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
        held.newest_use_ns = max(held.newest_use_ns, chunk.last_use_ns)
        result.dead_bytes += chunk.size
    elif is_chunk_dir and is_chunk_file(relative):
        result.chunks.append(chunk)
        result.chunk_bytes += chunk.size
    elif relative.endswith(TEMP_SUFFIX) or not is_chunk_dir or "/" in relative:
        # LMCache's temp files, its relative tmp dir, and any directory that is not a namespace: writes
        # in flight or someone else's files, counted and never touched.
        result.temp_files += 1
        result.temp_bytes += chunk.size
    else:
        result.other_bytes += chunk.size


def is_chunk_file(relative: str) -> bool:
    """A final chunk, by its path below a namespace: LMCache's flat `*.data`, or vLLM's fs tier layout."""
    if "/" not in relative:
        return relative.endswith(FINAL_SUFFIX)
    return NATIVE_CHUNK.fullmatch(relative) is not None


def lru_order(chunks: list[Chunk], order: str = "last-use") -> list[Chunk]:
    """Least recently used (or written) first; the path breaks ties so runs are reproducible."""
    if order == "written":
        return sorted(chunks, key=lambda c: (c.mtime_ns, c.relpath))
    return sorted(chunks, key=lambda c: (c.last_use_ns, c.relpath))


class _Remover:
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


@dataclass
class _Budget:
    """The run's work bounds."""

    max_files: int
    deadline: float
    clock: Callable[[], float] = time.monotonic
    removed: int = 0

    def exhausted(self) -> str | None:
        if self.removed >= self.max_files:
            return f"max-files {self.max_files}"
        if self.clock() >= self.deadline:
            return "max-seconds"
        return None


def evict(
    directory: str,
    high: str,
    low: str,
    capacity: str | None = None,
    min_age_s: float = 0.0,
    dry_run: bool = False,
    now: float | None = None,
    live: set[str] | None = None,
    dead_grace_s: float = 3600.0,
    order: str = "last-use",
    max_files: int = 100_000,
    max_seconds: float = 600.0,
    rank: Callable[[list[Chunk]], list[Chunk]] | None = None,
) -> dict[str, Any]:
    """Remove dead namespaces, then bring the directory to the low watermark when it is above the high
    one; return the report. `rank` replaces the LRU order (the eviction benchmark's offline optimum)."""
    if not os.path.isdir(directory):
        raise UsageError(f"--dir {directory!r} is not a directory (is the L2 volume mounted there?)")
    if order not in ORDERS:
        raise UsageError(f"--order {order!r}: expected one of {', '.join(ORDERS)}")
    if max_files < 1 or max_seconds <= 0:
        raise UsageError("--max-files and --max-seconds must be positive")
    if capacity is not None:
        capacity_bytes: int | None = parse_size(capacity)
    else:
        stats = os.statvfs(directory)
        capacity_bytes = stats.f_blocks * stats.f_frsize
    high_bytes = parse_watermark(high, capacity_bytes)
    low_bytes = parse_watermark(low, capacity_bytes)
    if low_bytes > high_bytes:
        raise UsageError(f"--low {low} ({low_bytes} B) is above --high {high} ({high_bytes} B)")

    started = time.time() if now is None else now
    budget = _Budget(max_files, time.monotonic() + max_seconds)
    found = scan(directory, live)
    used = found.used_bytes
    report: dict[str, Any] = {
        "check": "l2-evict",
        "dir": directory,
        "dry_run": dry_run,
        "order": order,
        "capacity_bytes": capacity_bytes,
        "high_bytes": high_bytes,
        "low_bytes": low_bytes,
        "used_bytes_before": used,
        "chunk_files": len(found.chunks),
        "temp_files": found.temp_files,
        "temp_bytes": found.temp_bytes,
        "dead_namespaces": sorted(found.dead),
        "dead_namespaces_in_grace": [],
        "dead_files": 0,
        "dead_bytes": 0,
        "evicted_files": 0,
        "evicted_bytes": 0,
        "evicted": [],
        "skipped_young": 0,
        "skipped_rewritten": 0,
        "vanished": 0,
        "stopped": None,
    }
    remover = _Remover(directory, dry_run)
    try:
        used = _remove_dead(found, remover, budget, report, used, int((started - dead_grace_s) * 1e9))
        if used > high_bytes and report["stopped"] is None:
            ordered = rank(found.chunks) if rank is not None else lru_order(found.chunks, order)
            used = _remove_lru(
                ordered, remover, budget, report, used, low_bytes, int((started - min_age_s) * 1e9)
            )
    finally:
        remover.close()
    report["used_bytes_after"] = used
    report["ok"] = used <= high_bytes
    verb = "would remove" if dry_run else "removed"
    report["summary"] = (
        f"{verb} {report['dead_files']} dead-namespace files ({report['dead_bytes']} B, "
        f"{len(found.dead) - len(report['dead_namespaces_in_grace'])} of {len(found.dead)} dead namespaces) "
        f"and {report['evicted_files']} live chunk files ({report['evicted_bytes']} B, {order} order); "
        f"used {report['used_bytes_before']} -> {used} B (high {high_bytes} B, low {low_bytes} B)"
        + (f"; stopped at {report['stopped']}" if report["stopped"] else "")
    )
    return report


def _remove_dead(
    found: Scan, remover: _Remover, budget: _Budget, report: dict, used: int, idle_before_ns: int
) -> int:
    for name in sorted(found.dead):
        held = found.dead[name]
        if held.newest_use_ns > idle_before_ns:
            report["dead_namespaces_in_grace"].append(name)
            continue
        for chunk in held.files:
            report["stopped"] = budget.exhausted()
            if report["stopped"]:
                return used
            outcome = _remove_one(chunk, remover, budget, report)
            if outcome != "rewritten":
                used -= chunk.size
            if outcome == "removed":
                report["dead_files"] += 1
                report["dead_bytes"] += chunk.size
        remover.prune(name)
    return used


def _remove_one(chunk: Chunk, remover: _Remover, budget: _Budget, report: dict) -> str:
    """Remove one scanned file unless it changed since the scan: "removed", "rewritten" (kept) or
    "vanished" (someone else removed it; its space is free all the same)."""
    outcome = remover.remove_unchanged(chunk)
    if outcome == "rewritten":
        report["skipped_rewritten"] += 1
    elif outcome == "vanished":
        report["vanished"] += 1
    else:
        budget.removed += 1
    return outcome


def _remove_lru(
    ordered: list[Chunk],
    remover: _Remover,
    budget: _Budget,
    report: dict,
    used: int,
    low_bytes: int,
    young_after_ns: int,
) -> int:
    for chunk in ordered:
        if used <= low_bytes:
            break
        report["stopped"] = budget.exhausted()
        if report["stopped"]:
            break
        if chunk.mtime_ns > young_after_ns:
            report["skipped_young"] += 1
            continue
        outcome = _remove_one(chunk, remover, budget, report)
        if outcome != "rewritten":
            used -= chunk.size
        if outcome != "removed":
            continue
        report["evicted_files"] += 1
        report["evicted_bytes"] += chunk.size
        if len(report["evicted"]) < REPORT_NAMES:
            report["evicted"].append(chunk.relpath)
    return used


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Remove dead L2 namespaces and evict L2 chunks (LRU; LMCache and vLLM fs-tier layouts)."
    )
    parser.add_argument("--dir", required=True, help="the L2 root (the umbrella's cache.l2.mountPath)")
    parser.add_argument("--high", required=True, help="start evicting above this: 85%% or a size (400Gi)")
    parser.add_argument("--low", required=True, help="evict down to this: 70%% or a size")
    parser.add_argument("--capacity", help="volume size for percentages (default: the filesystem size)")
    parser.add_argument(
        "--min-age", type=float, default=0.0, help="never evict chunks written less than this ago (s)"
    )
    parser.add_argument("--live", help="file naming the live namespace directories; others are dead")
    parser.add_argument(
        "--dead-grace", type=float, default=3600.0, help="a dead namespace idle this long (s) goes"
    )
    parser.add_argument(
        "--order", default="last-use", choices=ORDERS, help="last-use (atime or mtime) or written"
    )
    parser.add_argument(
        "--max-files", type=int, default=100_000, help="remove at most this many files per run"
    )
    parser.add_argument("--max-seconds", type=float, default=600.0, help="stop removing after this long (s)")
    parser.add_argument("--dry-run", action="store_true", help="report what would be removed, remove nothing")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return USAGE if exc.code else OK
    try:
        live = read_live(args.live) if args.live else None
        report = evict(
            args.dir,
            args.high,
            args.low,
            capacity=args.capacity,
            min_age_s=args.min_age,
            dry_run=args.dry_run,
            live=live,
            dead_grace_s=args.dead_grace,
            order=args.order,
            max_files=args.max_files,
            max_seconds=args.max_seconds,
        )
    except UsageError as exc:
        print(json.dumps({"check": "l2-evict", "ok": False, "summary": str(exc)}))
        return USAGE
    print(json.dumps(report, sort_keys=True))
    return OK if report["ok"] else FINDINGS


if __name__ == "__main__":
    sys.exit(main())
