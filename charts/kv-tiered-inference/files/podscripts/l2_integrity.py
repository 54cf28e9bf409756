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
"""

from __future__ import annotations

from typing import Any

MAGIC = b"kvtsum\x00\x01"  # format version in the last byte
DIGEST_BYTES = 16
TRAILER_BYTES = len(MAGIC) + DIGEST_BYTES

# Why a read failed verification: the metric label and the log word.
UNSEALED = "unsealed"  # exactly header + KV: written without integrity (before it was on, or elsewhere)
MISMATCH = "mismatch"  # trailer present, bytes changed since they were sealed
SHORT = "short"  # fewer bytes than the header says: cut short


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
