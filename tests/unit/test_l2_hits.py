"""The engines' L2 hit recorder (podscripts/l2_hits.py) on a real file; with LMCache it runs in
tests/engine/test_l2_hit_recording.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kvtier.podscripts import l2_hits

SECOND = 10**9


def old_file(tmp_path: Path) -> tuple[Path, int]:
    path = tmp_path / "vllm@m@1@0@00ab-SEP-bfloat16.data"
    path.write_bytes(b"\0" * 64)
    written = 1_700_000_000 * SECOND
    os.utime(path, ns=(written, written))
    return path, written


def test_set_atime_moves_atime_only(tmp_path: Path) -> None:
    path, written = old_file(tmp_path)
    l2_hits.set_atime(str(path), written + 3600 * SECOND + 123)
    info = path.stat()
    assert info.st_atime_ns == written + 3600 * SECOND + 123
    assert info.st_mtime_ns == written


def test_hits_are_recorded_at_most_once_per_interval(tmp_path: Path) -> None:
    path, written = old_file(tmp_path)
    now = [written + 100 * SECOND]
    recorder = l2_hits.HitRecorder(interval_s=60, clock=lambda: now[0])
    assert recorder.hit(str(path)) is True
    now[0] += 30 * SECOND
    assert recorder.hit(str(path)) is False  # within the interval: no metadata write
    assert path.stat().st_atime_ns == written + 100 * SECOND
    now[0] += 31 * SECOND
    assert recorder.hit(str(path)) is True
    assert path.stat().st_atime_ns == written + 161 * SECOND and path.stat().st_mtime_ns == written
    assert recorder.recorded == 2 and recorder.failed == 0


def test_a_failed_touch_is_counted_and_never_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    recorder = l2_hits.HitRecorder(interval_s=0)
    assert recorder.hit(str(tmp_path / "evicted-meanwhile.data")) is False
    assert recorder.failed == 1 and "could not record an L2 hit" in caplog.text
