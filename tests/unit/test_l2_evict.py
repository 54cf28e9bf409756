"""L2 eviction (podscripts/l2_evict.py) on a real directory laid out like LMCache's fs connector."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kvtier.podscripts import l2_evict

SCRIPT = Path(l2_evict.__file__)
KiB = 1024


def chunk(directory: Path, name: str, size: int, age_s: float, suffix: str = ".data") -> Path:
    """A chunk file named like LMCache's (key with '/' -> '-SEP-'), last written age_s ago."""
    path = directory / f"vllm@qwen@1@0@{name}-SEP-bfloat16{suffix}"
    path.write_bytes(b"\0" * size)
    stamp = time.time() - age_s
    os.utime(path, (stamp, stamp))
    return path


@pytest.fixture
def l2(tmp_path: Path) -> Path:
    directory = tmp_path / "l2cache"
    directory.mkdir()
    return directory


def test_below_high_watermark_evicts_nothing(l2: Path) -> None:
    for i in range(8):
        chunk(l2, f"c{i}", 10 * KiB, age_s=100 - i)
    report = l2_evict.evict(str(l2), high="90%", low="50%", capacity=str(100 * KiB))
    assert report["used_bytes_before"] == 80 * KiB
    assert report["evicted_files"] == 0
    assert report["ok"] is True
    assert len(list(l2.glob("*.data"))) == 8


def test_above_high_evicts_oldest_down_to_low(l2: Path) -> None:
    files = [chunk(l2, f"c{i}", 10 * KiB, age_s=1000 - i * 10) for i in range(10)]  # c0 oldest
    report = l2_evict.evict(str(l2), high="85%", low="60%", capacity=str(100 * KiB))
    assert report["used_bytes_before"] == 100 * KiB
    assert report["evicted_files"] == 4 and report["evicted_bytes"] == 40 * KiB
    assert report["used_bytes_after"] == 60 * KiB
    assert [p.exists() for p in files] == [False] * 4 + [True] * 6
    assert report["evicted"] == [p.name for p in files[:4]]
    assert report["ok"] is True


def test_lru_order_follows_mtime_not_name(l2: Path) -> None:
    newest = chunk(l2, "a", 10 * KiB, age_s=10)
    oldest = chunk(l2, "z", 10 * KiB, age_s=500)
    middle = chunk(l2, "m", 10 * KiB, age_s=100)
    l2_evict.evict(str(l2), high=str(25 * KiB), low=str(15 * KiB))
    assert not oldest.exists() and not middle.exists()
    assert newest.exists()


def test_absolute_sizes_and_quantities(l2: Path) -> None:
    for i in range(6):
        chunk(l2, f"c{i}", 1 * KiB, age_s=60 - i)
    report = l2_evict.evict(str(l2), high="5Ki", low="3Ki")
    assert report["high_bytes"] == 5 * KiB and report["low_bytes"] == 3 * KiB
    assert report["used_bytes_after"] == 3 * KiB
    assert l2_evict.parse_size("500Gi") == 500 * 2**30
    assert l2_evict.parse_size("1.5T") == 1_500_000_000_000
    assert l2_evict.parse_size("200G") == 200 * 10**9


def test_temp_files_are_counted_but_never_touched(l2: Path) -> None:
    temps = [chunk(l2, f"t{i}", 20 * KiB, age_s=9999, suffix=".tmp") for i in range(2)]
    tmpdir = l2 / "tmp"
    tmpdir.mkdir()
    in_tmpdir = chunk(tmpdir, "w", 10 * KiB, age_s=9999)  # LMCache's relative tmp dir keeps the .data name
    finals = [chunk(l2, f"c{i}", 10 * KiB, age_s=100 - i) for i in range(4)]
    report = l2_evict.evict(str(l2), high="50%", low="40%", capacity=str(100 * KiB))
    # 40 KiB temp + 10 KiB in tmp/ + 40 KiB final = 90 KiB; only the finals can go (50 KiB left = high).
    assert report["used_bytes_before"] == 90 * KiB
    assert report["temp_files"] == 3 and report["temp_bytes"] == 50 * KiB
    assert report["evicted_files"] == 4 and not any(p.exists() for p in finals)
    assert all(p.exists() for p in temps) and in_tmpdir.exists()
    assert report["used_bytes_after"] == 50 * KiB and report["ok"] is True


def test_namespace_directories_hold_candidates_and_their_tmp_dirs_do_not(l2: Path) -> None:
    # The umbrella's layout: <root>/<model>.<12 hex>/<key>.data, LMCache's relative tmp dir one level down.
    namespace = l2 / "qwen2-05b.5f72e297219f"
    namespace.mkdir()
    oldest = chunk(namespace, "old", 10 * KiB, age_s=900)
    top = chunk(l2, "top", 10 * KiB, age_s=800)  # a flat layout from before namespaces: still managed
    other = l2 / "not-a-namespace"  # any other directory's files are someone's writes in flight
    other.mkdir()
    foreign = chunk(other, "foreign", 10 * KiB, age_s=9999)
    (namespace / "tmp").mkdir()
    in_flight = chunk(namespace / "tmp", "w", 10 * KiB, age_s=9999)
    newest = chunk(namespace, "new", 10 * KiB, age_s=100)
    report = l2_evict.evict(str(l2), high="40%", low="30%", capacity=str(100 * KiB))
    assert report["used_bytes_before"] == 50 * KiB and report["temp_files"] == 2
    assert report["evicted"] == [f"{namespace.name}/{oldest.name}", top.name]  # paths below the root
    assert newest.exists() and foreign.exists() and in_flight.exists()
    assert report["used_bytes_after"] == 30 * KiB and report["ok"] is True


def test_young_files_are_kept_and_reported(l2: Path) -> None:
    for i in range(5):
        chunk(l2, f"c{i}", 10 * KiB, age_s=1)
    report = l2_evict.evict(str(l2), high="10%", low="5%", capacity=str(100 * KiB), min_age_s=60)
    assert report["evicted_files"] == 0
    assert report["skipped_young"] == 5
    assert report["ok"] is False


def test_dry_run_removes_nothing(l2: Path) -> None:
    for i in range(5):
        chunk(l2, f"c{i}", 10 * KiB, age_s=100 - i)
    report = l2_evict.evict(str(l2), high="10%", low="5%", capacity=str(100 * KiB), dry_run=True)
    assert report["evicted_files"] == 5
    assert len(list(l2.glob("*.data"))) == 5


def test_file_rewritten_after_scan_is_kept(l2: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = chunk(l2, "old", 10 * KiB, age_s=1000)
    chunk(l2, "other", 10 * KiB, age_s=900)
    real_scan = l2_evict.scan

    def scan_then_rewrite(directory: str) -> l2_evict.Scan:
        found = real_scan(directory)
        # A replica writes the same chunk again (temp file + atomic rename) after the scan.
        tmp = old.with_suffix(".tmp")
        tmp.write_bytes(b"\1" * (10 * KiB))
        os.replace(tmp, old)
        return found

    monkeypatch.setattr(l2_evict, "scan", scan_then_rewrite)
    report = l2_evict.evict(str(l2), high="15Ki", low="5Ki")
    assert old.exists(), "a chunk rewritten after the scan must survive"
    assert report["skipped_rewritten"] == 1


def test_concurrent_writer_loses_nothing_in_flight(l2: Path) -> None:
    """A writer keeps renaming temp files into place while eviction runs: no rename may fail."""
    for i in range(200):
        chunk(l2, f"seed{i}", 4 * KiB, age_s=3600 + i)
    errors: list[BaseException] = []
    stop = threading.Event()
    written: list[Path] = []

    def writer() -> None:
        n = 0
        try:
            while not stop.is_set():
                final = l2 / f"live{n}.data"
                tmp = final.with_suffix(".tmp")
                with open(tmp, "wb") as handle:
                    handle.write(b"\2" * (4 * KiB))
                os.replace(tmp, final)  # raises if the evictor removed the temp file
                written.append(final)
                n += 1
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        time.sleep(0.05)
        report = l2_evict.evict(str(l2), high="400Ki", low="200Ki", min_age_s=30)
    finally:
        stop.set()
        thread.join()
    assert not errors, errors
    assert report["evicted_files"] > 0
    assert all(p.exists() for p in written), "no chunk written during the run may be evicted"
    assert not list(l2.glob("*.tmp"))


def test_cli_prints_json_and_sets_exit_codes(l2: Path) -> None:
    for i in range(4):
        chunk(l2, f"c{i}", 10 * KiB, age_s=100 - i)
    argv = ["--dir", str(l2), "--high", "50%", "--low", "25%", "--capacity", "40Ki"]
    run = subprocess.run(
        [sys.executable, str(SCRIPT), *argv],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["evicted_files"] == 3
    bad = subprocess.run(
        [sys.executable, str(SCRIPT), "--dir", str(l2), "--high", "50%", "--low", "25%"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    # Without --capacity the filesystem's size is used: valid, and nothing is above 50% of a real disk.
    assert bad.returncode == 0 and json.loads(bad.stdout)["evicted_files"] == 0
    wrong = subprocess.run(
        [sys.executable, str(SCRIPT), "--dir", str(l2 / "missing"), "--high", "9", "--low", "1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert wrong.returncode == 2
    assert "not a directory" in json.loads(wrong.stdout)["summary"]


@pytest.mark.parametrize(
    ("high", "low", "message"),
    [("85", "90", "is above"), ("85%", "abc", "expected bytes"), ("150%", "10%", "(0, 100]")],
)
def test_bad_watermarks_are_usage_errors(l2: Path, high: str, low: str, message: str) -> None:
    with pytest.raises(l2_evict.UsageError, match=message.replace("(", r"\(").replace("]", r"\]")):
        l2_evict.evict(str(l2), high=high, low=low, capacity="100")
