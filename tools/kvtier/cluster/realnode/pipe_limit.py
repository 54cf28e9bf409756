"""fs.pipe-max-size raised while any Curvine FUSE client of this machine needs it, put back after the last.

curvine-fuse sizes its splice pipes just over 1 MiB (F_SETPIPE_SZ), above the kernel's default limit, and
this machine's kernel withholds CAP_SYS_RESOURCE even from privileged containers (curvine_release says
more). The limit is machine-wide while the clusters, benchmarks and test sessions that need it are many and
overlap: one that put its own "before" back on exit would break the FUSE mounts of every other still
running. So each holder registers under REGISTRY (its PID, the process's start time and a token, as a
file name); the first raises the limit and records the old value, and the old value goes back only when no
live holder is left. A holder killed without its exit is pruned by the next one to look, and by `settle`,
which every real-node `down` calls, so a killed session cannot keep the limit raised.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

NEEDED = 2 * 1024 * 1024  # above curvine-fuse's 1 MiB + 4 KiB pipes
LIMIT_FILE = Path("/proc/sys/fs/pipe-max-size")
REGISTRY = Path("/run/kvtier/pipe-max-size")
ORIGINAL = "original"  # the value before the first live holder raised it; absent when nothing was raised


def process_start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat); None if gone.
    With the PID it names one process: PIDs wrap within minutes on a busy machine."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _alive(holder: Path) -> bool:
    """Whether the process that made `holder` (holder-<pid>-<start time>-<token>) still runs."""
    pid, started = holder.name.split("-")[1:3]
    return pid.isdigit() and process_start_time(int(pid)) == started


@contextlib.contextmanager
def _locked() -> Iterator[list[Path]]:
    """The registry under its lock, with the holders of dead processes removed; yields the live ones."""
    REGISTRY.mkdir(parents=True, exist_ok=True)
    with (REGISTRY / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        live = []
        for holder in REGISTRY.glob("holder-*"):
            if _alive(holder):
                live.append(holder)
            else:
                holder.unlink(missing_ok=True)
        yield live


def _put_back_if_unheld(live: list[Path]) -> bool:
    """With no live holder left, the recorded value back (unless someone set another since); True if so."""
    original = REGISTRY / ORIGINAL
    if live or not original.exists():
        return False
    value = original.read_text().strip()
    original.unlink()
    if int(LIMIT_FILE.read_text()) != NEEDED:
        return False
    LIMIT_FILE.write_text(value + "\n")
    return True


@contextlib.contextmanager
def raised() -> Iterator[None]:
    """fs.pipe-max-size at least NEEDED while the block runs, and while any other holder's block runs."""
    me = REGISTRY / f"holder-{os.getpid()}-{process_start_time(os.getpid())}-{secrets.token_hex(4)}"
    with _locked() as live:
        current = int(LIMIT_FILE.read_text())
        if current < NEEDED:
            if not live or not (REGISTRY / ORIGINAL).exists():
                (REGISTRY / ORIGINAL).write_text(f"{current}\n")
            LIMIT_FILE.write_text(f"{NEEDED}\n")
        me.touch()
    try:
        yield
    finally:
        with _locked() as live:
            me.unlink(missing_ok=True)
            _put_back_if_unheld([h for h in live if h != me])


def settle() -> bool:
    """Holders of dead processes dropped; the old limit back if no live holder is left. True if put back."""
    with _locked() as live:
        return _put_back_if_unheld(live)
