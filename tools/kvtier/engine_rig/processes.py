"""Start, wait for and stop the rig's server processes (each in its own process group: no orphans)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from kvtier import waiting
from kvtier.engine_rig.errors import RigError


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


class Rig:
    """A set of server processes as a context manager: start() on entry, stop() on exit, also when start()
    fails half way, and on a plain SIGTERM (a CI timeout, kill) when entered from the main thread."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _exit_on_sigterm)
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    url: str

    def tail(self, lines: int = 25) -> str:
        return waiting.tail(self.log, lines, missing="(no log)")


def free_port() -> int:
    """A loopback port free right now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _guard() -> list[str]:
    """Wrap a command so it gets SIGTERM if this process dies without stopping it (no orphans). Linux sends
    the parent-death signal when the *thread* that started the child exits: start a process that must live
    on from a thread that outlives it (the soak restarts replicas from one long-lived thread)."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM"] if setpriv else []


def start(name: str, argv: list[str], env: dict[str, str], log_dir: Path, url: str) -> Process:
    """Start `argv` niced, in a new session, logging to log_dir/<name>.log."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}.log"
    with log.open("wb") as out:
        popen = subprocess.Popen(
            [*_guard(), "nice", "-n", "10", *argv],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **env},
            start_new_session=True,  # its own process group, so stop() reaches every child
        )
    return Process(name, popen, log, url)


def wait_ready(process: Process, path: str = "/health", timeout_s: float = 600.0) -> float:
    """Poll url+path until HTTP 200; seconds it took. RigError with the log's tail if it dies or hangs."""
    start_time = time.monotonic()

    def last_lines() -> str:
        return f"last lines of {process.log}:\n{process.tail()}"

    def healthy() -> bool:
        with urllib.request.urlopen(process.url + path, timeout=5) as response:
            return bool(response.status == 200)

    def exited(_: str) -> RigError | None:
        code = process.popen.poll()
        if code is None:
            return None
        return RigError(f"{process.name} exited with code {code}; {last_lines()}")

    waiting.wait_until(
        healthy,
        deadline=waiting.deadline_in(timeout_s),
        abort=exited,
        fail=lambda _: RigError(f"{process.name} not ready after {timeout_s:.0f} s; {last_lines()}"),
        tolerate=(urllib.error.URLError, OSError),
        interval=1.0,
    )
    return time.monotonic() - start_time


def kill(process: Process) -> None:
    """SIGKILL the process group at once (a crash: nothing of it cleans up) and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.popen.pid, signal.SIGKILL)
    process.popen.wait(30)


def stop(process: Process, grace_s: float = 20.0) -> None:
    """SIGTERM the process group, SIGKILL after grace_s; always reaps. Then removes the shared-memory
    segments the group had mapped and left behind: vLLM's `psm_*` message queues (and a native CPU tier's
    region) outlive a killed engine core, hundreds of MB of /dev/shm per replica."""
    segments = shm_segments(process.popen.pid)
    if process.popen.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.popen.pid, signal.SIGTERM)
        try:
            process.popen.wait(grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.popen.pid, signal.SIGKILL)
            process.popen.wait(10)
    # Children that outlived their parent (vLLM's engine core) still carry the group id.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.popen.pid, signal.SIGKILL)
    for segment in segments:
        with contextlib.suppress(FileNotFoundError):
            segment.unlink()


def shm_segments(group: int) -> set[Path]:
    """Files under /dev/shm mapped by any live process of the process group `group` (from /proc)."""
    found: set[Path] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != group:
                continue
            maps = (entry / "maps").read_text()
        except (OSError, ProcessLookupError):
            continue  # gone, or not ours to read
        for line in maps.splitlines():
            path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
            if path.startswith("/dev/shm/"):
                found.add(Path(path.removesuffix(" (deleted)")))
    return found
