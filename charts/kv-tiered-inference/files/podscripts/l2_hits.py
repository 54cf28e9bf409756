"""Records L2 hits as access times, so the eviction job (l2_evict.py) can evict least recently *used* chunks.

Reads never move a chunk file's atime on the bundle's L2: the Linux FUSE client marks its inodes S_NOATIME
and leaves atime to the daemon, and Curvine's master changes an inode's atime only on an explicit setattr
(docs/eviction.md cites both). Local filesystems mounted `relatime` move it on the first read after a write
only. So the bundle's LMCache storage plugin (l2_connector.py, LMCache's own fs connector) sets it
itself: one `utimensat(atime = now, mtime untouched)` per chunk served from L2, at most once per file and
`remote_storage_plugin.kvtier_l2.hit_interval_s` (default 60 s) per process, off the request path (the
read has already succeeded; a failed touch is logged and ignored).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import threading
import time
from typing import Any

DEFAULT_INTERVAL_S = 60.0
_UTIME_OMIT = (1 << 30) - 2  # <sys/stat.h>: leave this timestamp as it is
_AT_FDCWD = -100

log = logging.getLogger("kvtier.l2_hits")


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _libc_utimensat() -> Any:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.utimensat
    except (OSError, AttributeError):
        return None


_UTIMENSAT = _libc_utimensat()


def set_atime(path: str, now_ns: int) -> None:
    """Set the file's atime to now_ns and leave its mtime alone (the write time eviction relies on).

    utimensat with UTIME_OMIT changes atime only, in one call (a FUSE SETATTR with FATTR_ATIME alone);
    where libc is not reachable, stat + utime keeps the mtime read just before."""
    if _UTIMENSAT is not None:
        times = (_Timespec * 2)(_Timespec(now_ns // 10**9, now_ns % 10**9), _Timespec(0, _UTIME_OMIT))
        if _UTIMENSAT(_AT_FDCWD, os.fsencode(path), times, 0) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, os.strerror(errno), path)
        return
    os.utime(path, ns=(now_ns, os.stat(path).st_mtime_ns))


class HitRecorder:
    """Touches each hit file at most once per interval (per process): bounded metadata writes per hit."""

    def __init__(self, interval_s: float = DEFAULT_INTERVAL_S, clock: Any = time.time_ns) -> None:
        self.interval_ns = int(interval_s * 1e9)
        self.clock = clock
        self._last: dict[str, int] = {}
        self._lock = threading.Lock()
        self.recorded = 0
        self.failed = 0

    def hit(self, path: str) -> bool:
        """Record a hit on path; True when its atime was set now."""
        now = self.clock()
        with self._lock:
            last = self._last.get(path)
            if last is not None and now - last < self.interval_ns:
                return False
            self._last[path] = now
            if len(self._last) > 1_000_000:  # bound the memory of a long-running engine
                self._last.clear()
        try:
            set_atime(path, now)
        except OSError as error:  # the chunk was served; a lost touch only ages it early
            self.failed += 1
            log.warning("could not record an L2 hit on %s: %s", path, error)
            return False
        self.recorded += 1
        return True
