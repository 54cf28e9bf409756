"""Sealed raw-KV chunk files: a chunk's KV followed by one trailer page (l2_integrity.page_trailer).

Both L2 writers that store a chunk as its bare KV use it: vLLM's native fs tier (l2_native.py) and LMCache's
multi-process fs L2 adapter (l2_adapter.py). A store writes KV and page to a temp file and renames it over
the chunk's name; a load checks the size (KV + one page) before reading, reads both in one readv from one
open file, and checks the digest. The page keeps O_DIRECT's alignment for KV rows that are pages.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import secrets
import threading

try:
    from . import l2_integrity
except ImportError:  # in the engine pod: a top-level module beside l2_integrity.py
    import l2_integrity  # type: ignore[no-redef]

PAGE = l2_integrity.PAGE_BYTES

_local = threading.local()


def _trailer_buffer() -> mmap.mmap:
    """This thread's page-aligned trailer buffer (O_DIRECT needs aligned buffers)."""
    page = getattr(_local, "page", None)
    if page is None:
        page = _local.page = mmap.mmap(-1, PAGE)
    return page


def _temp_name(final: str) -> str:
    # `<final>_<n>.tmp`, the shape of vLLM's own temp names, which the eviction and warm-up scans skip;
    # random, as vLLM's: process and thread ids repeat across the pods of a Deployment, which share the L2.
    return f"{final}_{secrets.randbits(63)}.tmp"


def store_block(final: str, name: str, block: memoryview, o_direct: int) -> bool:
    """Write one chunk's KV and its trailer page to a temp file, then rename it over `final`; False when a
    chunk was already there, which is left as it is (vLLM's and LMCache's stores do the same: the same name
    is the same KV)."""
    if os.path.exists(final):
        return False
    os.makedirs(os.path.dirname(final), exist_ok=True)
    page = _trailer_buffer()
    page[:] = l2_integrity.page_trailer(name, block)
    temp = _temp_name(final)
    fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_TRUNC | o_direct, 0o644)
    try:  # from here on the temp file is this write's own, to remove on failure
        try:
            written = os.writev(fd, [block, page])
        finally:
            os.close(fd)
        if written != len(block) + PAGE:
            raise OSError(f"short write of {temp}: {written} of {len(block) + PAGE} bytes")
        os.replace(temp, final)
        return True
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temp)
        raise


def load_block(path: str, name: str, block: memoryview, o_direct: int) -> str | None:
    """Read one sealed chunk into `block`: None when it verified, else why not (l2_integrity's words). The
    size is checked before anything is read; one open, so KV and trailer come from one file even while a
    writer renames a new one over it. FileNotFoundError (evicted since the lookup) propagates."""
    fd = os.open(path, os.O_RDONLY | o_direct)
    try:
        size = os.fstat(fd).st_size
        if size == len(block):
            return l2_integrity.UNSEALED
        if size != len(block) + PAGE:
            return l2_integrity.SHORT if size < len(block) + PAGE else l2_integrity.MISMATCH
        page = _trailer_buffer()
        got = os.readv(fd, [block, page])
    finally:
        os.close(fd)
    if got != len(block) + PAGE:
        return l2_integrity.SHORT
    return l2_integrity.page_problem(name, block, bytes(page))


def reject(path: str, why: str, rejections: l2_integrity.Rejections) -> None:
    """Count, log and remove a chunk file that failed verification (the next store writes a good one),
    unless it is short and young (l2_integrity.dispose)."""
    l2_integrity.dispose(path, why, rejections)


def missing_state(writer: object, attributes: tuple[str, ...], books: tuple[str, ...]) -> list[str]:
    """What a sealed writer built on an upstream class (vLLM's fs tier, LMCache's fs adapter) needs from it
    and does not find: `attributes` it must have, `books` it must have as dicts. Checked at construction, so
    an upstream release that keeps them elsewhere refuses to start rather than fails on the first request."""
    missing = [a for a in attributes if not hasattr(writer, a)]
    return missing + [a for a in books if not isinstance(getattr(writer, a, None), dict)]
