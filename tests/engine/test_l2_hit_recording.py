"""Which recency signal the L2 really gives, measured on LMCache's own storage path (docs/eviction.md).

Each case stores a prompt's two chunks from one pod configured from values/cpu.yaml's render, reads the chunk
files once (the first read after a write, which `relatime` records), and serves the prompt to another pod.
Without hit recording LMCache's read leaves atime where it was: this machine's ext4 is mounted `relatime`,
which moves atime only on the first read after a write (and Curvine's FUSE mount never moves it). With
`cache.l2.eviction.recordHits` the chart loads l2_hits.py through LMCache's own remote storage plugin
loader, and every served chunk gets its atime set while its mtime (the write) stays."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from kvtier.engine_rig import invariants, rendered, tiers

TINY = {"layers": 2, "kv_heads": 2, "head_size": 64}
TOKENS = invariants.prompt_tokens(600, seed=11)  # two whole chunks of 256


def mount_options(path: Path) -> str:
    return subprocess.run(
        ["findmnt", "-n", "-o", "OPTIONS", "-T", str(path)], capture_output=True, text=True, check=False
    ).stdout.strip()


def serve_after_one_read(
    work: Path, record_hits: bool
) -> tuple[dict, list[tuple[int, ...]], invariants.Pod, int]:
    """Store, read each chunk file once (the first read after a write, which relatime records), serve the
    prompt again: the lookup's verdict, (atime, mtime) before and after per chunk file, and when the lookup
    started."""
    name = "recorded" if record_hits else "plain"
    overlay = {"cache": {"l2": {"eviction": {"recordHits": record_hits, "hitIntervalSeconds": 0}}}}
    engine = rendered.render_engine([tiers.CPU_VALUES], overlay, work / name / "render")
    pod = invariants.pod_case(engine, work / name / "l2", work / name, TINY)
    store = {**pod.case, "tokens": TOKENS, "kv_seed": 1, "action": "store"}
    (stored,) = invariants.run_cases([store], pod.seed, work)
    assert stored["error"] is None and stored["stored_files"] == 2, stored
    files = sorted(pod.l2_dir.glob("*.data"))
    for path in files:
        path.read_bytes()
    before = [(p.stat().st_atime_ns, p.stat().st_mtime_ns) for p in files]
    lookup_started = time.time_ns()
    lookup = {**pod.case, "tokens": TOKENS, "kv_seed": 1, "action": "lookup"}
    (found,) = invariants.run_cases([lookup], pod.seed, work)
    after = [(p.stat().st_atime_ns, p.stat().st_mtime_ns) for p in files]
    return found, [(*b, *a) for b, a in zip(before, after, strict=True)], pod, lookup_started


def test_a_hit_leaves_atime_alone_without_recording(work: Path) -> None:
    found, times, pod, _ = serve_after_one_read(work, record_hits=False)
    assert found["hit_tokens"] == 512 and found["data_ok"] is True, found
    if "strictatime" in mount_options(pod.l2_dir):
        pytest.skip(f"{pod.l2_dir} is mounted strictatime: every read moves atime there")
    for atime_before, mtime_before, atime_after, mtime_after in times:
        assert (atime_after, mtime_after) == (atime_before, mtime_before), "relatime: no second update"


def test_recorded_hits_set_atime_and_keep_the_write_time(work: Path) -> None:
    found, times, pod, lookup_started = serve_after_one_read(work, record_hits=True)
    config = Path(pod.case["config"]).read_text()
    assert "remote_url" not in config and "HitRecordingFSConnector" in config  # loaded as LMCache's plugin
    assert found["hit_tokens"] == 512 and found["data_ok"] is True and found["error"] is None, found
    for atime_before, mtime_before, atime_after, mtime_after in times:
        assert mtime_after == mtime_before, "the write time eviction relies on must not move"
        assert atime_after >= lookup_started > atime_before, "each served chunk's atime is the hit's time"
