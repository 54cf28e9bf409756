#!/usr/bin/env python3
"""Keeps LMCache's shared filesystem L2 under a high watermark by evicting least-recently-written chunks.

LMCache's filesystem connector never deletes anything, so the L2 directory grows until the volume is full.
This script, run by the umbrella chart's CronJob (and importable by the toolkit), measures the directory
and, when it holds more than the high watermark, removes the oldest final chunk files (`*.data`, oldest
modification time first) until it is at or below the low watermark. Standard library only; Python >= 3.9.

    python3 l2_evict.py --dir D --high 85% --low 70% [--capacity 500Gi] [--min-age 60] [--dry-run]

Why these rules (LMCache 0.5.x `fs_connector.py`):
- a chunk is written to `<key>.tmp` (or to `<tmp dir>/<key>.data` when `fs_connector_relative_tmp_dir` is
  set) and renamed to `<key>.data` in the directory LMCache is given: the umbrella gives each model its own
  namespace directory, `<model name>.<12 hex>` under the L2 root, so candidates are the `*.data` files at
  the top level and directly inside such a namespace; a file still being written is never touched (but
  counts towards the usage);
- a rename keeps the temp file's mtime and reads never touch the file, so mtime = last write; LRU here
  means least recently *written*, the best signal the filesystem gives;
- every lookup checks the file on disk, so a removed chunk is a clean miss on every replica.

A file whose inode, size or mtime changed between the scan and the removal was rewritten meanwhile and is
kept. Prints one JSON report; exits 0 when the directory ends at or below the high watermark, 1 when it
could not get there (every remaining file too young or rewritten), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any

OK, FINDINGS, USAGE = 0, 1, 2
FINAL_SUFFIX = ".data"
TEMP_SUFFIX = ".tmp"
# The umbrella's L2 namespace directories (kv-tiered-inference.l2Namespace): a DNS-label model name, a dot,
# 12 hex digits. A dot never occurs in a model name, so no other directory matches.
NAMESPACE_DIR = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\.[0-9a-f]{12}")
REPORT_NAMES = 20  # evicted file names listed in the report (the count and bytes cover all)

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


@dataclass(frozen=True)
class Chunk:
    """A final chunk file as seen by the scan."""

    path: str
    size: int
    mtime_ns: int
    inode: int


@dataclass
class Scan:
    """What the L2 directory holds: candidates (final chunks) and everything else that uses space."""

    chunks: list[Chunk] = field(default_factory=list)
    chunk_bytes: int = 0
    temp_files: int = 0
    temp_bytes: int = 0
    other_bytes: int = 0

    @property
    def used_bytes(self) -> int:
        return self.chunk_bytes + self.temp_bytes + self.other_bytes


def scan(directory: str) -> Scan:
    """Measure the directory without following links. Candidates are the `*.data` files of the top level and
    of each namespace directory: LMCache writes final chunks flat in the directory it is given, while files
    deeper down (its relative tmp dir) are writes in flight."""
    result = Scan()
    stack = [directory]
    while stack:
        current = stack.pop()
        parent, name = os.path.split(current)
        chunk_dir = current == directory or (
            parent == directory and NAMESPACE_DIR.fullmatch(name) is not None
        )
        try:
            entries = list(os.scandir(current))
        except FileNotFoundError:
            continue  # removed while walking
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                    continue
                if not entry.is_file(follow_symlinks=False):
                    continue
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # renamed or removed between listing and stat
            if chunk_dir and entry.name.endswith(FINAL_SUFFIX):
                result.chunks.append(Chunk(entry.path, info.st_size, info.st_mtime_ns, info.st_ino))
                result.chunk_bytes += info.st_size
            elif entry.name.endswith(TEMP_SUFFIX) or not chunk_dir:
                result.temp_files += 1
                result.temp_bytes += info.st_size
            else:
                result.other_bytes += info.st_size
    return result


def lru_order(chunks: list[Chunk]) -> list[Chunk]:
    """Least recently written first; the path breaks ties so runs are reproducible."""
    return sorted(chunks, key=lambda c: (c.mtime_ns, c.path))


def _unchanged(chunk: Chunk) -> bool | None:
    """True when the file is still the one scanned; False when rewritten; None when gone."""
    try:
        info = os.stat(chunk.path, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns) == (chunk.inode, chunk.size, chunk.mtime_ns)


def evict(
    directory: str,
    high: str,
    low: str,
    capacity: str | None = None,
    min_age_s: float = 0.0,
    dry_run: bool = False,
    now: float | None = None,
) -> dict[str, Any]:
    """Bring the directory to the low watermark when it is above the high one; return the report."""
    if not os.path.isdir(directory):
        raise UsageError(f"--dir {directory!r} is not a directory (is the L2 volume mounted there?)")
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
    found = scan(directory)
    used = found.used_bytes
    report: dict[str, Any] = {
        "check": "l2-evict",
        "dir": directory,
        "dry_run": dry_run,
        "capacity_bytes": capacity_bytes,
        "high_bytes": high_bytes,
        "low_bytes": low_bytes,
        "used_bytes_before": used,
        "chunk_files": len(found.chunks),
        "temp_files": found.temp_files,
        "temp_bytes": found.temp_bytes,
        "evicted_files": 0,
        "evicted_bytes": 0,
        "evicted": [],
        "skipped_young": 0,
        "skipped_rewritten": 0,
        "vanished": 0,
    }
    if used > high_bytes:
        young_after_ns = int((started - min_age_s) * 1e9)
        for chunk in lru_order(found.chunks):
            if used <= low_bytes:
                break
            if chunk.mtime_ns > young_after_ns:
                report["skipped_young"] += 1
                continue
            state = _unchanged(chunk)
            if state is None:
                report["vanished"] += 1
                used -= chunk.size
                continue
            if not state:
                report["skipped_rewritten"] += 1
                continue
            if not dry_run:
                try:
                    os.unlink(chunk.path)
                except FileNotFoundError:
                    report["vanished"] += 1
                    used -= chunk.size
                    continue
            used -= chunk.size
            report["evicted_files"] += 1
            report["evicted_bytes"] += chunk.size
            if len(report["evicted"]) < REPORT_NAMES:
                report["evicted"].append(os.path.relpath(chunk.path, directory))
    report["used_bytes_after"] = used
    report["ok"] = used <= high_bytes
    report["summary"] = (
        f"{'would evict' if dry_run else 'evicted'} {report['evicted_files']} chunk files "
        f"({report['evicted_bytes']} B); used {report['used_bytes_before']} -> {used} B "
        f"(high {high_bytes} B, low {low_bytes} B)"
    )
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Evict least-recently-written LMCache L2 chunk files.")
    parser.add_argument("--dir", required=True, help="the L2 directory (LMCache remote_url path)")
    parser.add_argument("--high", required=True, help="start evicting above this: 85%% or a size (400Gi)")
    parser.add_argument("--low", required=True, help="evict down to this: 70%% or a size")
    parser.add_argument("--capacity", help="volume size for percentages (default: the filesystem size)")
    parser.add_argument("--min-age", type=float, default=0.0, help="never evict files younger than this (s)")
    parser.add_argument("--dry-run", action="store_true", help="report what would be evicted, remove nothing")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return USAGE if exc.code else OK
    try:
        report = evict(args.dir, args.high, args.low, args.capacity, args.min_age, args.dry_run)
    except UsageError as exc:
        print(json.dumps({"check": "l2-evict", "ok": False, "summary": str(exc)}))
        return USAGE
    print(json.dumps(report, sort_keys=True))
    return OK if report["ok"] else FINDINGS


if __name__ == "__main__":
    sys.exit(main())
