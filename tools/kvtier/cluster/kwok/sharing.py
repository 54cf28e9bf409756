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

STARTED_BY_TESTS = ".started-by-tests"


def _users(name: str) -> Path:
    # Outside kwokctl's clusters/ folder, which it expects to hold cluster folders only.
    return binaries.cache_dir() / "cluster-users" / name


@contextmanager
def _locked(name: str) -> Iterator[None]:
    path = binaries.cache_dir() / "cluster-users" / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


@contextmanager
def shared(name: str, timeout: float, keep: bool = False) -> Iterator[lifecycle.ClusterInfo]:
    """The cluster `name`, up for the duration; stopped after the last user when tests started it."""
    users = _users(name)
    me = users / str(os.getpid())
    with _locked(name):
        info = lifecycle.up(name, timeout=timeout)
        users.mkdir(parents=True, exist_ok=True)
        if info.started:
            (users / STARTED_BY_TESTS).touch()
        me.touch()
    try:
        yield info
    finally:
        with _locked(name):
            me.unlink(missing_ok=True)
            others = [p for p in users.iterdir() if p.name.isdigit() and _alive(int(p.name))]
            if not others and (users / STARTED_BY_TESTS).exists() and not keep:
                lifecycle.down(name)
                (users / STARTED_BY_TESTS).unlink(missing_ok=True)


def remove_abandoned(prefix: str) -> list[str]:
    """Delete clusters named `<prefix><pid>` whose test session (that pid) no longer runs."""
    removed = []
    root = binaries.cache_dir() / "clusters"
    for folder in sorted(root.glob(f"{prefix}*")) if root.is_dir() else []:
        suffix = folder.name[len(prefix) :]
        if folder.is_dir() and suffix.isdigit() and not _alive(int(suffix)):
            with _locked(folder.name):
                lifecycle.down(folder.name, progress=lambda _: None)
            removed.append(folder.name)
    return removed
