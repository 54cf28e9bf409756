"""kvtier.waiting: the one deadline loop and log tail of the clusters' and the rig's start-up waits."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kvtier import waiting


def test_returns_the_first_truthy_answer() -> None:
    answers = iter([None, "", [], "ready"])
    assert (
        waiting.wait_until(
            lambda: next(answers), deadline=waiting.deadline_in(5), fail=RuntimeError, interval=0
        )
        == "ready"
    )


def test_a_tolerated_error_is_not_yet_and_names_itself_at_the_deadline() -> None:
    def check() -> bool:
        raise ConnectionError("connection refused\nsecond line")

    with pytest.raises(TimeoutError) as raised:
        waiting.wait_until(
            check, deadline=waiting.deadline_in(0.05), fail=TimeoutError, tolerate=(OSError,), interval=0.01
        )
    assert str(raised.value) == " (last error: connection refused)"


def test_an_error_without_text_is_named_by_its_type() -> None:
    def check() -> bool:
        raise ValueError

    with pytest.raises(TimeoutError, match=r"last error: ValueError\)"):
        waiting.wait_until(check, deadline=0, fail=TimeoutError, tolerate=(ValueError,), interval=0)


def test_an_error_not_tolerated_propagates_at_once() -> None:
    calls = []

    def check() -> bool:
        calls.append(1)
        raise KeyError("bug")

    with pytest.raises(KeyError):
        waiting.wait_until(check, deadline=waiting.deadline_in(5), fail=TimeoutError, tolerate=(OSError,))
    assert len(calls) == 1


def test_abort_stops_before_the_deadline() -> None:
    started = time.monotonic()
    with pytest.raises(ProcessLookupError, match="died"):
        waiting.wait_until(
            lambda: False,
            deadline=waiting.deadline_in(30),
            fail=TimeoutError,
            abort=lambda last: ProcessLookupError("died" + last),
        )
    assert time.monotonic() - started < 5


def test_abort_is_asked_only_after_a_miss() -> None:
    assert (
        waiting.wait_until(
            lambda: 1, deadline=0, fail=TimeoutError, abort=lambda last: AssertionError("asked")
        )
        == 1
    )


def test_fail_at_the_deadline_after_asking_again() -> None:
    calls = []
    with pytest.raises(TimeoutError):
        waiting.wait_until(
            lambda: calls.append(1), deadline=waiting.deadline_in(0.05), fail=TimeoutError, interval=0.01
        )
    assert len(calls) >= 2


def test_tail_shows_the_last_lines_or_the_missing_text(tmp_path: Path) -> None:
    log = tmp_path / "component.log"
    log.write_text("".join(f"line {i}\n" for i in range(30)))
    assert waiting.tail(log, 3) == "line 27\nline 28\nline 29"
    assert waiting.tail(tmp_path / "absent.log", missing="(no log)") == "(no log)"
