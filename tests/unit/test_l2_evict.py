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

from kvtier.podscripts import l2_evict, l2_scan

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

    def scan_then_rewrite(directory: str, live: set[str] | None = None) -> l2_evict.Scan:
        found = real_scan(directory, live)
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


def used_at(path: Path, used_ago_s: float) -> None:
    """A hit recorded used_ago_s ago: atime moves, mtime (the write) stays."""
    stamp = time.time() - used_ago_s
    os.utime(path, ns=(int(stamp * 1e9), path.stat().st_mtime_ns))


def test_last_use_order_keeps_a_hot_chunk_written_first(l2: Path) -> None:
    system_prompt = chunk(l2, "sys", 10 * KiB, age_s=5000)  # written first, hit a minute ago
    used_at(system_prompt, 60)
    one_offs = [chunk(l2, f"doc{i}", 10 * KiB, age_s=1000 - i) for i in range(3)]  # never hit
    report = l2_evict.evict(str(l2), high="30Ki", low="20Ki")
    assert system_prompt.exists()
    assert [p.exists() for p in one_offs] == [False, False, True]
    assert report["order"] == "last-use"

    # The write-time order of earlier releases evicts the hot chunk first.
    for i in range(2):
        chunk(l2, f"again{i}", 10 * KiB, age_s=900 - i)
    l2_evict.evict(str(l2), high="30Ki", low="20Ki", order="written")
    assert not system_prompt.exists()


def live_file(tmp_path: Path, *names: str) -> set[str]:
    listing = tmp_path / "live-namespaces.txt"
    listing.write_text("# rendered by the chart\n" + "\n".join(names) + "\n")
    return l2_evict.read_live(str(listing))


def test_dead_namespaces_go_first_whatever_the_watermarks(l2: Path, tmp_path: Path) -> None:
    live_ns, dead_ns, rolling_ns = (
        l2 / n for n in ("qwen.aaaaaaaaaaaa", "qwen.bbbbbbbbbbbb", "qwen.cccccccccccc")
    )
    for directory in (live_ns, dead_ns, rolling_ns, dead_ns / "tmp"):
        directory.mkdir()
    live_chunks = [chunk(live_ns, f"l{i}", 10 * KiB, age_s=9000) for i in range(3)]
    dead_chunks = [chunk(dead_ns, f"d{i}", 10 * KiB, age_s=8000) for i in range(3)]
    stale_temp = chunk(dead_ns / "tmp", "w", 5 * KiB, age_s=8000)
    rolling = chunk(rolling_ns, "r", 10 * KiB, age_s=8000)
    used_at(rolling, 30)  # an old replica still reads its configuration: a rollout in progress
    foreign = l2 / "lost+found"
    foreign.mkdir()
    kept = chunk(foreign, "x", 1 * KiB, age_s=9000)

    live = live_file(tmp_path, live_ns.name)
    report = l2_evict.evict(str(l2), high="90%", low="80%", capacity="1Mi", live=live, dead_grace_s=600)
    assert not dead_ns.exists(), "an idle dead namespace goes entirely, its directory too"
    assert report["dead_files"] == 4 and report["dead_bytes"] == 35 * KiB
    assert report["dead_namespaces"] == [dead_ns.name, rolling_ns.name]
    assert report["dead_namespaces_in_grace"] == [rolling_ns.name]
    assert rolling.exists() and kept.exists() and all(p.exists() for p in live_chunks)
    assert report["evicted_files"] == 0, "below the high watermark no live chunk goes"
    assert report["used_bytes_after"] == report["used_bytes_before"] - 35 * KiB
    assert "4 dead-namespace files" in report["summary"] and "1 of 2 dead namespaces" in report["summary"]
    assert not any(p.exists() for p in [*dead_chunks, stale_temp])


def test_without_a_live_list_every_namespace_is_live(l2: Path) -> None:
    namespace = l2 / "qwen.bbbbbbbbbbbb"
    namespace.mkdir()
    chunk(namespace, "d", 10 * KiB, age_s=9000)
    report = l2_evict.evict(str(l2), high="90%", low="80%", capacity="1Mi")
    assert report["dead_namespaces"] == [] and report["dead_files"] == 0
    assert list(namespace.iterdir())


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "No such file"), ("qwen.aaaaaaaaaaaa\n../etc\n", "not a namespace directory name")],
)
def test_bad_live_lists_are_usage_errors(tmp_path: Path, content: str | None, message: str) -> None:
    listing = tmp_path / "live.txt"
    if content is not None:
        listing.write_text(content)
    with pytest.raises(l2_evict.UsageError, match=message):
        l2_evict.read_live(str(listing))


def test_links_never_lead_outside_the_root(l2: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    precious = [chunk(outside, f"p{i}", 10 * KiB, age_s=9000) for i in range(3)]
    (l2 / "qwen.dddddddddddd").symlink_to(outside, target_is_directory=True)  # a namespace that is a link
    (l2 / "escape.data").symlink_to(precious[0])  # a chunk that is a link
    chunk(l2, "mine", 10 * KiB, age_s=9000)
    report = l2_evict.evict(str(l2), high="1Ki", low="0", live=set(), dead_grace_s=0)
    assert all(p.exists() for p in precious)
    assert report["evicted_files"] == 1 and report["dead_files"] == 0


def test_a_directory_swapped_for_a_link_after_the_scan_is_not_followed(
    l2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    namespace = l2 / "qwen.aaaaaaaaaaaa"
    namespace.mkdir()
    victims = [chunk(namespace, f"c{i}", 10 * KiB, age_s=9000) for i in range(3)]
    outside = tmp_path / "outside"
    real_scan = l2_evict.scan

    def scan_then_swap(directory: str, live: set[str] | None = None) -> l2_evict.Scan:
        found = real_scan(directory, live)
        namespace.rename(outside)  # same files, now outside the root, and a link where the directory was
        namespace.symlink_to(outside, target_is_directory=True)
        return found

    monkeypatch.setattr(l2_evict, "scan", scan_then_swap)
    report = l2_evict.evict(str(l2), high="1Ki", low="0")
    assert all((outside / v.name).exists() for v in victims)
    assert report["evicted_files"] == 0 and report["skipped_rewritten"] == 3


def test_files_vanishing_under_the_run_are_counted_not_errors(
    l2: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = [chunk(l2, f"c{i}", 10 * KiB, age_s=9000 - i) for i in range(4)]
    real_scan = l2_evict.scan

    def scan_then_remove(directory: str, live: set[str] | None = None) -> l2_evict.Scan:
        found = real_scan(directory, live)
        files[0].unlink()  # another evictor, or an operator, got there first
        return found

    monkeypatch.setattr(l2_evict, "scan", scan_then_remove)
    report = l2_evict.evict(str(l2), high="25Ki", low="20Ki")
    assert report["vanished"] == 1 and report["evicted_files"] == 1
    assert report["evicted_bytes"] == 10 * KiB and report["used_bytes_after"] == 20 * KiB


def test_work_per_run_is_bounded(l2: Path) -> None:
    for i in range(10):
        chunk(l2, f"c{i}", 10 * KiB, age_s=9000 - i)
    report = l2_evict.evict(str(l2), high="10Ki", low="0", max_files=3)
    assert report["evicted_files"] == 3 and len(list(l2.glob("*.data"))) == 7
    assert report["stopped"] == "max-files 3" and report["ok"] is False
    assert "stopped at max-files 3" in report["summary"]
    with pytest.raises(l2_evict.UsageError, match="must be positive"):
        l2_evict.evict(str(l2), high="10Ki", low="0", max_files=0)


def test_dry_run_reports_dead_namespaces_and_removes_nothing(l2: Path) -> None:
    dead = l2 / "qwen.bbbbbbbbbbbb"
    dead.mkdir()
    chunk(dead, "d", 10 * KiB, age_s=9000)
    report = l2_evict.evict(str(l2), high="90%", low="80%", capacity="1Mi", live=set(), dry_run=True)
    assert report["dead_files"] == 1 and "would remove 1 dead-namespace files" in report["summary"]
    assert list(dead.iterdir())


def test_two_runs_at_once_never_double_delete(l2: Path) -> None:
    """Two evictors on one directory (CronJob runs overlapping despite concurrencyPolicy, or two releases):
    every file is removed by exactly one of them and neither fails."""
    count = 400
    for i in range(count):
        chunk(l2, f"c{i:04d}", 1 * KiB, age_s=9000 - i)
    barrier = threading.Barrier(2)
    reports: list[dict] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait()
            reports.append(l2_evict.evict(str(l2), high="100Ki", low="0"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    removed = count - len(list(l2.glob("*.data")))
    assert removed == count
    assert sum(r["evicted_files"] for r in reports) == removed
    assert sum(r["evicted_files"] + r["vanished"] for r in reports) >= count


def test_cli_reads_the_live_list(l2: Path, tmp_path: Path) -> None:
    dead = l2 / "qwen.bbbbbbbbbbbb"
    dead.mkdir()
    chunk(dead, "d", 10 * KiB, age_s=9000)
    listing = tmp_path / "live.txt"
    listing.write_text("qwen.aaaaaaaaaaaa\n")
    argv = ["--dir", str(l2), "--high", "90%", "--low", "80%", "--capacity", "1Mi", "--live", str(listing)]
    run = subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["dead_files"] == 1 and not dead.exists()
    bad = subprocess.run(
        [sys.executable, str(SCRIPT), *argv[:-1], str(tmp_path / "none")], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "--live" in json.loads(bad.stdout)["summary"]


def native_chunk(namespace: Path, digest: str, size: int, age_s: float, rank: int = 0) -> Path:
    """A chunk file where vLLM's fs tier puts it below its root_dir (vllm/v1/kv_offload/file_mapper.py):
    <model arg>_<12 hex>_r<rank>/<hash[:3]>/<hash[3:5]>_g<group>/<hash>.bin."""
    folder = namespace / f"_models_qwen_0123456789ab_r{rank}" / digest[:3] / f"{digest[3:5]}_g0"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{digest}.bin"
    path.write_bytes(b"\0" * size)
    stamp = time.time() - age_s
    os.utime(path, (stamp, stamp))
    return path


def test_native_fs_tier_files_are_candidates_and_its_config_and_temp_files_are_not(l2: Path) -> None:
    namespace = l2 / "qwen2-7b.0123456789ab"
    oldest = native_chunk(namespace, "a1" * 32, 10 * KiB, age_s=900)
    middle = native_chunk(namespace, "b2" * 32, 10 * KiB, age_s=800, rank=1)
    newest = native_chunk(namespace, "c3" * 32, 10 * KiB, age_s=100)
    config = namespace / "_models_qwen_0123456789ab" / "config.json"  # the layout's description
    config.parent.mkdir()
    config.write_text("{}" + " " * (10 * KiB - 2))
    in_flight = oldest.parent / f"{'d4' * 32}.bin_1a2b3c.tmp"  # a write before its rename
    in_flight.write_bytes(b"\0" * 10 * KiB)
    misplaced = namespace / "notes" / "x.bin"  # a .bin outside the layout: not vLLM's, not ours
    misplaced.parent.mkdir()
    misplaced.write_bytes(b"\0" * 10 * KiB)
    os.utime(misplaced, (time.time() - 9999, time.time() - 9999))
    report = l2_evict.evict(str(l2), high="50%", low="40%", capacity=str(100 * KiB))
    assert report["used_bytes_before"] == 60 * KiB
    assert report["evicted"] == [str(oldest.relative_to(l2)), str(middle.relative_to(l2))]
    assert newest.exists() and config.exists() and in_flight.exists() and misplaced.exists()
    assert report["used_bytes_after"] == 40 * KiB and report["ok"] is True


def test_a_dead_native_namespace_goes_entirely(l2: Path, tmp_path: Path) -> None:
    live_ns, dead_ns = l2 / "qwen.aaaaaaaaaaaa", l2 / "qwen.bbbbbbbbbbbb"
    kept = native_chunk(live_ns, "a1" * 32, KiB, age_s=9000)
    for digest in ("b2" * 32, "c3" * 32):
        native_chunk(dead_ns, digest, KiB, age_s=9000)
    live = live_file(tmp_path, live_ns.name)
    report = l2_evict.evict(str(l2), high="90%", low="80%", capacity="1Mi", live=live, dead_grace_s=600)
    assert report["dead_files"] == 2 and not dead_ns.exists(), "its nested directories are pruned too"
    assert kept.exists()


NS = "qwen.aaaaaaaaaaaa"


def pin(namespace: Path, prefix: str, files: list[object] | str) -> Path:
    """The warm-up's pin file for a prefix: the chunk files it produced, relative to the namespace (or the
    raw text given)."""
    folder = namespace / ".kvtier-warm"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{prefix}.json"
    path.write_text(files if isinstance(files, str) else json.dumps({"prefix": prefix, "files": files}))
    return path


def pin_listing(tmp_path: Path, *lines: str) -> Path:
    listing = tmp_path / "pinned-prefixes.txt"
    listing.write_text("# rendered by the chart\n\n" + "\n".join(lines) + "\n")
    return listing


def read_pins(l2: Path, tmp_path: Path, *lines: str) -> l2_evict.Pins:
    return l2_evict.read_pins(str(l2), str(pin_listing(tmp_path, *lines)))


def test_pinned_chunks_survive_an_lru_pass_that_would_remove_them(l2: Path, tmp_path: Path) -> None:
    namespace = l2 / NS
    namespace.mkdir()
    files = [chunk(namespace, f"c{i}", 10 * KiB, age_s=1000 - i * 10) for i in range(6)]  # c0 oldest
    pin(namespace, "system", [files[0].name, files[2].name])
    unpinned = l2_evict.evict(str(l2), high="45Ki", low="35Ki", dry_run=True)
    assert unpinned["evicted"] == [f"{NS}/{p.name}" for p in files[:3]], "without pins the oldest go"

    pins = read_pins(l2, tmp_path, f"{NS}/system")
    assert pins.files == {f"{NS}/{files[0].name}", f"{NS}/{files[2].name}"}
    report = l2_evict.evict(str(l2), high="45Ki", low="35Ki", pins=pins)
    assert [p.exists() for p in files] == [True, False, True, False, False, True]
    assert report["evicted"] == [f"{NS}/{files[i].name}" for i in (1, 3, 4)]
    assert report["skipped_pinned"] == 2
    assert report["pinned_files"] == 2 and report["pinned_bytes"] == 20 * KiB
    assert report["pins_missing"] == [] and report["pins_unreadable"] == []
    assert report["ok"] is True and "pinned" not in report["summary"]


def test_pins_name_native_fs_tier_chunks_by_their_nested_paths(l2: Path, tmp_path: Path) -> None:
    namespace = l2 / NS
    oldest = native_chunk(namespace, "a1" * 32, 10 * KiB, age_s=900)
    newer = native_chunk(namespace, "b2" * 32, 10 * KiB, age_s=800)
    pin(namespace, "system", [str(oldest.relative_to(namespace))])
    report = l2_evict.evict(str(l2), high="15Ki", low="10Ki", pins=read_pins(l2, tmp_path, f"{NS}/system"))
    assert oldest.exists() and not newer.exists()
    assert report["pinned_files"] == 1 and report["evicted_files"] == 1


def test_a_prefix_no_longer_listed_pins_nothing_and_a_missing_pin_file_is_reported(
    l2: Path, tmp_path: Path
) -> None:
    namespace = l2 / NS
    namespace.mkdir()
    kept, retired, other = (chunk(namespace, n, 10 * KiB, age_s=900 - i) for i, n in enumerate("abc"))
    pin(namespace, "system", [kept.name])
    pin(namespace, "retired", [retired.name])  # the environment dropped this prefix: its pin file stays
    pins = read_pins(l2, tmp_path, f"{NS}/system", f"{NS}/not-warmed-yet", f"{NS}/system")
    assert pins.missing == [f"{NS}/not-warmed-yet"] and pins.unreadable == []
    report = l2_evict.evict(str(l2), high="15Ki", low="10Ki", pins=pins)
    assert kept.exists() and not retired.exists() and not other.exists()
    assert report["pins_missing"] == [f"{NS}/not-warmed-yet"]
    assert report["pinned_files"] == 1 and report["ok"] is True


def test_unusable_pin_files_and_entries_are_reported_not_fatal(l2: Path, tmp_path: Path) -> None:
    namespace, neighbour = l2 / NS, l2 / "qwen.bbbbbbbbbbbb"
    namespace.mkdir()
    neighbour.mkdir()
    victims = [chunk(namespace, f"v{i}", 10 * KiB, age_s=900 - i) for i in range(2)]
    outside = chunk(neighbour, "n", 10 * KiB, age_s=950)
    kept = chunk(namespace, "k", 10 * KiB, age_s=990)
    pin(namespace, "broken", '{"prefix": "broken", "files": [')
    pin(namespace, "not-a-list", json.dumps({"prefix": "not-a-list", "files": victims[0].name}))
    escaping = [f"../{neighbour.name}/{outside.name}", f"/{victims[1].name}", 7, None, "", kept.name]
    pin(namespace, "escaping", escaping)
    pins = read_pins(l2, tmp_path, *(f"{NS}/{p}" for p in ("broken", "not-a-list", "escaping")))
    assert pins.files == {f"{NS}/{kept.name}"}, "only the plain path below the namespace pins"
    warm = f"{NS}/.kvtier-warm"
    assert pins.unreadable[0].startswith(f"{warm}/broken.json: not JSON (")
    assert pins.unreadable[1] == f'{warm}/not-a-list.json: expected a JSON object with a "files" list'
    assert pins.unreadable[2].startswith(f"{warm}/escaping.json: 5 entries ignored (files[0] '../qwen.")
    assert pins.unreadable[2].endswith(
        ", ...): expected paths relative to the namespace directory without '..'"
    )
    assert len(pins.unreadable) == 3
    report = l2_evict.evict(str(l2), high="15Ki", low="10Ki", pins=pins)
    assert report["pins_unreadable"] == pins.unreadable
    assert kept.exists() and not outside.exists() and not any(p.exists() for p in victims)
    assert report["evicted_files"] == 3 and report["ok"] is True


def test_a_dead_namespace_goes_entirely_pins_included(l2: Path, tmp_path: Path) -> None:
    live_ns, dead_ns = l2 / NS, l2 / "qwen.bbbbbbbbbbbb"
    live_ns.mkdir()
    dead_ns.mkdir()
    kept = chunk(live_ns, "l", 10 * KiB, age_s=9000)
    pinned = chunk(dead_ns, "d", 10 * KiB, age_s=9000)
    pin_file = pin(dead_ns, "system", [pinned.name])
    os.utime(pin_file, (time.time() - 9000, time.time() - 9000))
    pins = read_pins(l2, tmp_path, f"{dead_ns.name}/system")
    assert pins.files == {f"{dead_ns.name}/{pinned.name}"}
    report = l2_evict.evict(
        str(l2), high="90%", low="80%", capacity="1Mi", live={NS}, dead_grace_s=600, pins=pins
    )
    assert not dead_ns.exists(), "a dead namespace can never be hit again: its pins hold nothing"
    assert report["dead_files"] == 2 and report["pinned_files"] == 0
    assert kept.exists()


def test_pin_files_are_other_bytes_not_temp_files(l2: Path) -> None:
    namespace = l2 / NS
    namespace.mkdir()
    chunk(namespace, "c", 10 * KiB, age_s=900)
    pin_file = pin(namespace, "system", [])
    being_written = pin_file.with_name("other.json.tmp")  # the warm-up replacing a pin file
    being_written.write_bytes(b"\0" * KiB)
    found = l2_scan.scan(str(l2))
    assert [c.name for c in found.chunks] == [next(namespace.glob("*.data")).name]
    assert found.temp_files == 0 and found.temp_bytes == 0
    assert found.other_bytes == pin_file.stat().st_size + KiB
    report = l2_evict.evict(str(l2), high="1Ki", low="0")
    assert report["evicted_files"] == 1 and pin_file.exists() and being_written.exists()
    assert report["used_bytes_after"] == found.other_bytes


def test_cli_reads_the_pins_and_says_when_they_keep_the_directory_full(l2: Path, tmp_path: Path) -> None:
    namespace = l2 / NS
    namespace.mkdir()
    pinned = [chunk(namespace, f"p{i}", 10 * KiB, age_s=900 - i) for i in range(3)]
    free = chunk(namespace, "f", 10 * KiB, age_s=100)
    pin(namespace, "system", [p.name for p in pinned])
    listing = pin_listing(tmp_path, f"{NS}/system  # the shared system prompt", f"{NS}/absent")
    argv = ["--dir", str(l2), "--high", "25Ki", "--low", "10Ki", "--pins", str(listing)]
    run = subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, check=False)
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    assert all(p.exists() for p in pinned) and not free.exists()
    assert report["pinned_bytes"] == 30 * KiB and report["pins_missing"] == [f"{NS}/absent"]
    assert report["summary"].endswith(f"; {30 * KiB} B pinned by the warm-up")

    bad_listing = pin_listing(tmp_path, f"{NS}/system", f"{NS}/../etc")
    bad = subprocess.run(
        [sys.executable, str(SCRIPT), *argv[:-1], str(bad_listing)], capture_output=True, text=True
    )
    assert bad.returncode == 2
    assert json.loads(bad.stdout)["summary"].startswith(f"--pins {bad_listing}:4: '{NS}/../etc' is not ")
    assert all(p.exists() for p in pinned), "a bad listing stops the run before it removes anything"


@pytest.mark.parametrize(
    "line",
    [
        "qwen.aaaaaaaaaaaa",
        "qwen.aaaaaaaaaaaa/",
        "qwen/system",
        "qwen.aaaaaaaaaaaa/a/b",
        "qwen.aaaaaaaaaaaa/-x",
    ],
)
def test_malformed_pin_listing_lines_are_usage_errors(tmp_path: Path, line: str) -> None:
    listing = pin_listing(tmp_path, line)
    with pytest.raises(l2_evict.UsageError, match=f"^--pins {listing}:3: .* is not <namespace dir>/<prefix"):
        l2_evict.read_pin_listing(str(listing))


# Stale temp files: each writer's temp shape (l2_scan.is_temp_file), orphaned by a writer that died mid-write
# or whose cleanup failed, is reclaimed once not written for --stale-temp-age.
STALE_S = 3600.0


def aged(path: Path, size: int, age_s: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\0" * size)
    stamp = time.time() - age_s
    os.utime(path, (stamp, stamp))
    return path


def orphans(l2: Path, age_s: float) -> list[Path]:
    """One temp file of each writer's shape, last written age_s ago: in the root (a flat layout),
    in a namespace, in LMCache's relative tmp dir there, and beside a chunk of vLLM's fs tier."""
    namespace = l2 / NS
    hashes = namespace / "_models_qwen_0123456789ab_r0" / "a1a" / "1a_g0"
    return [
        chunk(l2, "flat", KiB, age_s=age_s, suffix=".tmp"),  # LMCache's <key>.tmp
        aged(namespace / "vllm@qwen@1@0@k-SEP-bfloat16.tmp", 2 * KiB, age_s),
        aged(namespace / "vllm@qwen@1@0@k-SEP-bfloat16.9f8e7d6c5b4a3928.tmp", 3 * KiB, age_s),  # own_temp
        aged(namespace / "tmp" / "vllm@qwen@1@0@r-SEP-bfloat16.data", 4 * KiB, age_s),  # relative tmp dir
        aged(hashes / f"{'a1' * 32}.bin_8123456789.tmp", 5 * KiB, age_s),  # vLLM's fs tier, l2_blocks
    ]


def test_the_scan_lists_each_writers_temp_files_and_nothing_else(l2: Path) -> None:
    temps = orphans(l2, age_s=10)
    namespace = l2 / NS
    final = chunk(namespace, "c", KiB, age_s=10)
    native = native_chunk(namespace, "b2" * 32, KiB, age_s=10)
    config = aged(namespace / "_models_qwen_0123456789ab" / "config.json", KiB, 10)
    foreign = aged(l2 / "not-a-namespace" / "x.tmp", KiB, 10)  # someone else's directory
    pin_part = aged(namespace / l2_scan.PIN_DIR / "system.json.42.part", KiB, 10)
    found = l2_scan.scan(str(l2))
    assert sorted(t.relpath for t in found.temps) == sorted(str(t.relative_to(l2)) for t in temps)
    assert {c.relpath for c in found.chunks} == {str(final.relative_to(l2)), str(native.relative_to(l2))}
    # config.json and the foreign directory are counted as before (temp bytes), never listed.
    assert found.temp_files == len(temps) + 2 and config.exists() and foreign.exists() and pin_part.exists()
    assert not l2_scan.is_temp_file("_models_qwen_0123456789ab/config.json")
    assert not l2_scan.is_temp_file("vllm@qwen@1@0@k-SEP-bfloat16.data")


def test_stale_temp_files_go_whatever_the_watermarks_and_fresh_ones_stay(l2: Path) -> None:
    stale = orphans(l2, age_s=STALE_S + 60)
    fresh = chunk(l2 / NS, "w", 6 * KiB, age_s=STALE_S - 60, suffix=".tmp")  # a slow write, still going
    foreign = aged(l2 / "not-a-namespace" / "x.tmp", KiB, STALE_S * 10)
    kept = chunk(l2 / NS, "c", KiB, age_s=STALE_S * 10)
    report = l2_evict.evict(str(l2), high="100%", low="90%", capacity="1Mi", stale_temp_s=STALE_S)
    assert not any(p.exists() for p in stale)
    assert fresh.exists() and foreign.exists() and kept.exists()
    assert (l2 / NS / "tmp").is_dir(), "LMCache made its tmp dir at start and never makes it again"
    assert report["stale_temp_files"] == 5 and report["stale_temp_bytes"] == 15 * KiB
    assert report["stale_temp_age_s"] == STALE_S and report["evicted_files"] == 0
    assert report["used_bytes_after"] == report["used_bytes_before"] - 15 * KiB
    assert f", 5 stale temp files ({15 * KiB} B) and 0 live chunk files" in report["summary"]


def test_without_a_stale_age_temp_files_stay(l2: Path) -> None:
    stale = orphans(l2, age_s=STALE_S * 100)
    report = l2_evict.evict(str(l2), high="1Ki", low="0")
    assert all(p.exists() for p in stale)
    assert report["stale_temp_files"] == 0 and report["stale_temp_age_s"] is None
    assert "stale temp" not in report["summary"]


def test_reclaimed_temp_space_spares_live_chunks(l2: Path) -> None:
    orphans(l2, age_s=STALE_S * 2)  # 15 KiB of garbage
    chunks = [chunk(l2 / NS, f"c{i}", 10 * KiB, age_s=900 - i) for i in range(3)]
    report = l2_evict.evict(str(l2), high="40Ki", low="30Ki", stale_temp_s=STALE_S)
    # 45 KiB before: the orphans alone bring it to 30 KiB, so no chunk goes.
    assert report["stale_temp_bytes"] == 15 * KiB and report["evicted_files"] == 0
    assert all(p.exists() for p in chunks) and report["used_bytes_after"] == 30 * KiB


@pytest.mark.parametrize("change", ["append", "touch"])
def test_a_temp_written_between_the_scan_and_its_removal_is_kept(
    l2: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    stalled = orphans(l2, age_s=STALE_S * 2)
    resumed = stalled[1]
    real_scan = l2_evict.scan

    def scan_then_write(directory: str, live: set[str] | None = None) -> l2_evict.Scan:
        found = real_scan(directory, live)
        if change == "append":  # the stalled writer goes on: size and mtime move
            with open(resumed, "ab") as handle:
                handle.write(b"\1" * KiB)
        else:  # only the mtime moves (a write over bytes already there)
            os.utime(resumed)
        return found

    monkeypatch.setattr(l2_evict, "scan", scan_then_write)
    report = l2_evict.evict(str(l2), high="1Mi", low="1Mi", stale_temp_s=STALE_S)
    assert resumed.exists() and report["skipped_rewritten"] == 1
    assert report["stale_temp_files"] == 4 and not any(p.exists() for p in stalled if p != resumed)


def test_dry_run_reports_stale_temp_files_and_keeps_them(l2: Path) -> None:
    stale = orphans(l2, age_s=STALE_S * 2)
    report = l2_evict.evict(str(l2), high="1Mi", low="1Mi", stale_temp_s=STALE_S, dry_run=True)
    assert report["stale_temp_files"] == 5 and all(p.exists() for p in stale)


def test_cli_removes_stale_temp_files_and_refuses_a_bad_age(l2: Path) -> None:
    stale = orphans(l2, age_s=STALE_S * 2)
    argv = ["--dir", str(l2), "--high", "90%", "--low", "80%", "--capacity", "1Mi"]
    run = subprocess.run(
        [sys.executable, str(SCRIPT), *argv, "--stale-temp-age", "3600"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["stale_temp_files"] == 5 and not any(p.exists() for p in stale)
    for bad in ("0", "-5", "nan"):
        refused = subprocess.run(
            [sys.executable, str(SCRIPT), *argv, "--stale-temp-age", bad],
            capture_output=True,
            text=True,
            check=False,
        )
        assert refused.returncode == 2, bad
        assert json.loads(refused.stdout)["summary"].startswith(f"--stale-temp-age {bad}: expected seconds")
