"""Stops a shared local cluster once nobody has used it for a while (as Bazel's server does).

`kvtier validate` dry-runs on a local control plane by default; starting one costs ~20 s, reusing a
running one a few milliseconds a request. So the run that starts it leaves it up and spawns this watcher,
detached: it stops the cluster when no user is registered (sharing.shared) and the last one left more
than the latest run's idle seconds ago, or exits when somebody else stopped it first.

    python -m kvtier.cluster.kwok.idle NAME
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from kvtier.cluster.kwok import lifecycle, sharing

POLL_S = 20.0
WATCHER = "idle-watcher.pid"
IDLE = "idle-seconds"  # written by each run that uses the cluster: the watcher reads it every poll
DEFAULT_IDLE_S = 900.0


def _pid_file(name: str) -> Path:
    return sharing.users_dir(name) / WATCHER


def _idle_file(name: str) -> Path:
    return sharing.users_dir(name) / IDLE


def spawn(name: str, idle_s: float) -> None:
    """Stop `name` after idle_s seconds without a user: the latest run's idle time wins, and one watcher
    (started here unless one is alive) outlives this process to apply it."""
    _idle_file(name).write_text(str(idle_s))
    pid_file = _pid_file(name)
    try:
        if sharing.alive(int(pid_file.read_text())):
            return
    except (OSError, ValueError):
        pass
    log = sharing.users_dir(name) / "idle-watcher.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kvtier.cluster.kwok.idle", name],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            close_fds=True,  # a CI runner waits for every holder of its pipes: hold none of them
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
    pid_file.write_text(str(proc.pid))


def idle_seconds(name: str) -> float:
    try:
        return float(_idle_file(name).read_text())
    except (OSError, ValueError):
        return DEFAULT_IDLE_S


def should_stop(name: str, idle_s: float, now: float) -> bool:
    """Whether `name` has had no user for idle_s seconds (called under the cluster's lock)."""
    if sharing.live_users(name):
        return False
    return now - sharing.last_used(name) >= idle_s


def watch(name: str) -> None:
    while True:
        time.sleep(min(POLL_S, max(idle_seconds(name), 1.0)))
        if not lifecycle.running(name):
            return  # stopped by someone else
        with sharing.locked(name):
            if should_stop(name, idle_seconds(name), time.time()):
                sharing.stop_if_ours(name)
                return


def main(argv: list[str]) -> int:
    name = argv[0]
    try:
        watch(name)
    finally:
        _pid_file(name).unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
