"""Waiting for something to come up, and the last lines of a log to show when it did not.

Every start-up wait of the clusters and the engine rig is the same loop: ask, sleep, give up at a
deadline with an error that names what did not happen; stop at once when the thing waited on is already
dead; while a component starts, an exception from the question means "not yet". One loop, here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def deadline_in(seconds: float) -> float:
    """A deadline for wait_until, `seconds` from now."""
    return time.monotonic() + seconds


def wait_until(
    check: Callable[[], T],
    *,
    deadline: float,
    fail: Callable[[str], BaseException],
    abort: Callable[[str], BaseException | None] = lambda last: None,
    tolerate: tuple[type[BaseException], ...] = (),
    interval: float = 0.5,
) -> T:
    """check()'s first truthy answer, asked every `interval` seconds until `deadline` (time.monotonic()).

    An exception of a `tolerate` type counts as "not yet". abort() is asked after each miss and returns
    an error to raise now (a dead process), or None; at the deadline fail()'s error is raised. Both get
    the last tolerated error as " (last error: ...)", or "" when there was none.
    """
    last = ""
    while True:
        try:
            answer = check()
            if answer:
                return answer
        except tolerate as error:
            first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
            last = f" (last error: {first_line})"
        stop = abort(last)
        if stop is not None:
            raise stop
        if time.monotonic() > deadline:
            raise fail(last)
        time.sleep(interval)


def tail(log: Path, lines: int = 20, missing: str = "") -> str:
    """The last `lines` lines of a log file, or `missing` when it cannot be read."""
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return missing
