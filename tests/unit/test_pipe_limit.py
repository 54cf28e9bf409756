"""realnode.pipe_limit: fs.pipe-max-size raised while any holder on the machine needs it, the old value back
after the last live one, whichever exits first, and a killed holder's raise undone by the next to look."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvtier.cluster.realnode import pipe_limit

DEFAULT = 1048576


@pytest.fixture
def limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for /proc/sys/fs/pipe-max-size at the kernel's default, and a registry of the test's own."""
    file = tmp_path / "pipe-max-size"
    file.write_text(f"{DEFAULT}\n")
    monkeypatch.setattr(pipe_limit, "LIMIT_FILE", file)
    monkeypatch.setattr(pipe_limit, "REGISTRY", tmp_path / "registry")
    return file


def _value(limit: Path) -> int:
    return int(limit.read_text())


def test_the_first_to_leave_keeps_the_limit_raised_for_the_other(limit: Path) -> None:
    first, second = pipe_limit.raised(), pipe_limit.raised()
    first.__enter__()
    assert _value(limit) == pipe_limit.NEEDED
    second.__enter__()
    first.__exit__(None, None, None)
    assert _value(limit) == pipe_limit.NEEDED  # the second holder's mounts still need it
    second.__exit__(None, None, None)
    assert _value(limit) == DEFAULT


def test_nested_holders_in_one_process_put_it_back_once_at_the_end(limit: Path) -> None:
    with pipe_limit.raised():
        with pipe_limit.raised():
            assert _value(limit) == pipe_limit.NEEDED
        assert _value(limit) == pipe_limit.NEEDED
    assert _value(limit) == DEFAULT


def _holder_of(pid: int) -> str:
    return f"holder-{pid}-{pipe_limit.process_start_time(pid)}-cafe"


def test_a_holder_in_another_live_process_keeps_it_and_its_death_lets_settle_put_it_back(limit: Path) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pipe_limit.raised():
            (pipe_limit.REGISTRY / _holder_of(other.pid)).touch()  # as that process's raised() leaves it
        assert _value(limit) == pipe_limit.NEEDED
        assert pipe_limit.settle() is False
    finally:
        other.kill()
        other.wait()
    assert pipe_limit.settle() is True  # its holder is pruned: nobody needs the raise any more
    assert _value(limit) == DEFAULT
    assert pipe_limit.settle() is False


def test_a_reused_pid_is_not_taken_for_the_holder_that_died(limit: Path) -> None:
    """The PID of a dead holder reused by another process: the start time tells them apart."""
    with pipe_limit.raised():
        (pipe_limit.REGISTRY / f"holder-{os.getpid()}-1-cafe").touch()  # this PID, another start time
    assert _value(limit) == DEFAULT


def test_a_value_someone_else_set_meanwhile_is_left_alone(limit: Path) -> None:
    with pipe_limit.raised():
        limit.write_text("4194304\n")
    assert _value(limit) == 4194304


def test_a_limit_already_high_enough_is_neither_raised_nor_lowered(limit: Path) -> None:
    limit.write_text("8388608\n")
    with pipe_limit.raised():
        assert _value(limit) == 8388608
    assert _value(limit) == 8388608
    assert not (pipe_limit.REGISTRY / pipe_limit.ORIGINAL).exists()
