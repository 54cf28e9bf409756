"""One test cluster shared by every pytest session on the machine that asks for it.

Several sessions (parallel engineers, a rerun while another runs) may want the same cluster: starting is
serialised with a file lock, each session registers itself, and the last session to leave stops a cluster
that a test session started. A cluster someone started by hand (`kvtier cluster up`) is never stopped.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kvtier.cluster.common import binaries
from kvtier.cluster.kwok import lifecycle

STARTED_BY_TESTS = ".started-by-tests"  # started by a user of shared() (tests, validate), not by hand
LAST_USED = ".last-used"  # touched as each user arrives and leaves: idle.py reads its time


def users_dir(name: str) -> Path:
    # Outside kwokctl's clusters/ folder, which it expects to hold cluster folders only.
    return binaries.state_dir() / "cluster-users" / name


@contextmanager
def locked(name: str) -> Iterator[None]:
    path = binaries.state_dir() / "cluster-users" / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def live_users(name: str) -> list[int]:
    """The processes registered as using `name` that still run."""
    users = users_dir(name)
    found = [int(p.name) for p in users.iterdir() if p.name.isdigit()] if users.is_dir() else []
    return [pid for pid in found if alive(pid)]


def last_used(name: str) -> float:
    """When the last user of `name` left (or arrived), as a Unix time; 0 when never."""
    try:
        return (users_dir(name) / LAST_USED).stat().st_mtime
    except OSError:
        return 0.0


def stop_if_ours(name: str) -> None:
    """Stop `name` when a user of shared() started it; one started by hand keeps running."""
    marker = users_dir(name) / STARTED_BY_TESTS
    if marker.exists():
        lifecycle.down(name, progress=lambda _: None)
        marker.unlink(missing_ok=True)


@contextmanager
def shared(name: str, timeout: float, keep: bool = False) -> Iterator[lifecycle.ClusterInfo]:
    """The cluster `name`, up for the duration. After the last user, a cluster a user of this started is
    stopped, unless `keep` (then idle.py's watcher stops it later)."""
    users = users_dir(name)
    me = users / str(os.getpid())
    with locked(name):
        info = lifecycle.up(name, timeout=timeout)
        users.mkdir(parents=True, exist_ok=True)
        if info.started:
            (users / STARTED_BY_TESTS).touch()
        me.touch()
        (users / LAST_USED).touch()
    try:
        yield info
    finally:
        with locked(name):
            me.unlink(missing_ok=True)
            (users / LAST_USED).touch()
            if not live_users(name) and not keep:
                stop_if_ours(name)


def remove_abandoned(prefix: str) -> list[str]:
    """Delete clusters named `<prefix><pid>` whose test session (that pid) no longer runs."""
    removed = []
    root = binaries.state_dir() / "clusters"
    for folder in sorted(root.glob(f"{prefix}*")) if root.is_dir() else []:
        suffix = folder.name[len(prefix) :]
        if folder.is_dir() and suffix.isdigit() and not alive(int(suffix)):
            with locked(folder.name):
                lifecycle.down(folder.name, progress=lambda _: None)
            removed.append(folder.name)
    return removed
