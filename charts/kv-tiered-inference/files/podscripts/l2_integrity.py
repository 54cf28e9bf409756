"""Sealed L2 chunk files: a checksum trailer, so a chunk whose bytes changed is a miss, never wrong KV.

LMCache's fs connector writes a chunk file as its 28-byte metadata header and the raw KV, and reads it back
without any check: a chunk changed in place (a bit flip on NVMe, a torn write seen through another node's
cache, a writer killed before its rename on a file system without atomic rename over FUSE) is loaded as
KV and the engine answers fluently from it (docs/reliability.md shows it on the rig). The bundle's LMCache
plugin (l2_connector.py) appends

    MAGIC (8 bytes) + BLAKE3(len(key) + key + header + KV) truncated to 16 bytes

to every file it writes and checks it on every read. The key is hashed too, so a file under another
chunk's name does not pass. LMCache's own reader reads the header and exactly the KV length the header
gives, so it still reads sealed files (a rolling upgrade mixes both). BLAKE3 because vLLM and LMCache both
depend on it (it is in every engine image) and it hashes at several GiB/s on one core, releasing the GIL.

vLLM's native fs tier writes a chunk as its raw KV, page-aligned, with O_DIRECT, and reads it the same way;
the bundle's sealed tier (l2_native.py) appends one page instead of 24 bytes, so both parts stay aligned:

    MAGIC (8 bytes) + BLAKE3(len(name) + name + KV) truncated to 16 bytes, zero-filled to PAGE_BYTES

where `name` is the file's path below the tier's root_dir. vLLM's own fs reader reads exactly the KV's
length, so it still reads sealed files.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from typing import Any

MAGIC = b"kvtsum\x00\x01"  # format version in the last byte
DIGEST_BYTES = 16
TRAILER_BYTES = len(MAGIC) + DIGEST_BYTES
# The native tier's trailer: one page, the O_DIRECT alignment of vLLM's fs tier (its chunk rows are pages).
PAGE_BYTES = 4096

# Why a read failed verification: the metric label and the log word.
UNSEALED = "unsealed"  # exactly header + KV: written without integrity (before it was on, or elsewhere)
MISMATCH = "mismatch"  # trailer present, bytes changed since they were sealed
SHORT = "short"  # fewer bytes than the header says: cut short
# A chunk just renamed into place can read short for a moment on Curvine: its FUSE client completes the file
# on the master when the writer's handle is released, which the kernel sends after close() has returned
# (docs/curvine-fuse.md, "Faults across two nodes"). A short chunk this young is a miss but is kept: the
# next read finds it whole. An older one, or any other refusal, is removed so the next store rewrites it.
SETTLING_S = 60.0

log = logging.getLogger("kvtier.l2")


class Rejections:
    """Chunks that failed verification, by reason (l2_integrity's words), in this process."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def add(self, reason: str) -> None:
        with self._lock:
            self.counts[reason] += 1


def _digest(key: str, header: bytes, payload: Any) -> bytes:
    import blake3  # the engine image's; imported here so the toolkit imports this module without it

    name = key.encode()
    hasher = blake3.blake3(len(name).to_bytes(4, "little") + name)
    hasher.update(header)
    # LMCache's byte_array is a memoryview of a ctypes array, format "<B"; BLAKE3 takes plain bytes ("B")
    hasher.update(memoryview(payload).cast("B"))
    return bytes(hasher.digest(length=DIGEST_BYTES))


def trailer(key: str, header: bytes, payload: Any) -> bytes:
    """The bytes to append after header + payload."""
    return MAGIC + _digest(key, header, payload)


def problem(key: str, header: bytes, payload: Any, tail: bytes) -> str | None:
    """None when `tail` (what follows the KV) seals exactly this key, header and payload; else why not:
    UNSEALED when nothing follows, SHORT when a trailer is cut, MISMATCH when any byte differs."""
    if not tail:
        return UNSEALED
    if len(tail) < TRAILER_BYTES:
        return SHORT
    if len(tail) > TRAILER_BYTES or not tail.startswith(MAGIC):
        return MISMATCH
    return None if tail[len(MAGIC) :] == _digest(key, header, payload) else MISMATCH


def page_trailer(name: str, payload: Any) -> bytes:
    """The page to append after a native chunk's KV: the trailer of (name, no header, KV), zero-filled."""
    return trailer(name, b"", payload).ljust(PAGE_BYTES, b"\0")


def page_problem(name: str, payload: Any, page: bytes) -> str | None:
    """None when `page` (what follows a native chunk's KV) seals exactly this name and KV; else why not, as
    `problem` says. A trailer page whose fill is not all zeros is a MISMATCH: every byte is checked."""
    if not page:
        return UNSEALED
    if len(page) < PAGE_BYTES:
        return SHORT
    if len(page) > PAGE_BYTES or page[TRAILER_BYTES:].count(0) != PAGE_BYTES - TRAILER_BYTES:
        return MISMATCH
    return problem(name, b"", payload, page[:TRAILER_BYTES])


def still_settling(path: str, why: str) -> bool:
    """Whether refused chunk `path` is short and was modified less than SETTLING_S ago (either way, for
    clocks a little apart), so its writer's release may still be on the way."""
    if why != SHORT:
        return False
    try:
        age = time.time() - os.stat(path).st_mtime
    except OSError:
        return False
    return abs(age) < SETTLING_S


def dispose(path: str, why: str, rejections: Rejections) -> None:
    """Count and log a chunk file that failed verification; remove it unless it is still settling."""
    rejections.add(why)
    if still_settling(path, why):
        log.warning(
            "L2 chunk %s failed verification (%s), served as a miss and kept: written less than %.0f s ago,"
            " its writer's close may not have reached the file system yet; rejected so far: %s",
            path,
            why,
            SETTLING_S,
            dict(rejections.counts),
        )
        return
    log.error(
        "L2 chunk %s failed verification (%s), served as a miss and removed; rejected so far: %s",
        path,
        why,
        dict(rejections.counts),
    )
    try:
        os.remove(path)
    except OSError as error:
        log.warning("could not remove rejected L2 chunk %s: %s", path, error)
