"""Which recency signal the L2 really gives, measured on LMCache's own storage path (docs/eviction.md).

Each case stores a prompt's two chunks from one pod configured from values/cpu.yaml's render, reads the chunk
files once (the first read after a write, which `relatime` records), and serves the prompt to another pod.
The L2 directory is bind-mounted onto itself with the atime rule the case needs, so the result does not
depend on how this machine mounts its temporary folder (mounting needs root: skipped locally without it,
failed under CI). Without hit recording LMCache's read leaves atime where it was on a `relatime` mount,
which moves atime only on the first read after a write (and Curvine's FUSE mount never moves it), while a
`strictatime` mount moves it on every read: the contrast shows the relatime result is the mount's rule at
work, not a read that never happened. With `cache.l2.eviction.recordHits` the chart loads its L2 plugin
(l2_connector.py, with l2_hits.py's recorder) through LMCache's own remote storage plugin loader, and every
served chunk gets its atime set while its mtime (the write) stays, on a relatime mount where nothing else
would move it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.engine import invariants
from kvtier.engine_rig import rendered, tiers

TINY = {"layers": 2, "kv_heads": 2, "head_size": 64}
TOKENS = invariants.prompt_tokens(600, seed=11)  # two whole chunks of 256


def mount_options(path: Path) -> list[str]:
    out = subprocess.run(
        ["findmnt", "-n", "-o", "OPTIONS", "--mountpoint", str(path)], capture_output=True, text=True
    )
    return out.stdout.strip().split(",")


@contextlib.contextmanager
def atime_mount(where: Path, rule: str, need) -> Iterator[Path]:
    """`where` bind-mounted onto itself with the atime rule `rule` (relatime or strictatime), unmounted
    afterwards: the same filesystem as the test's folder, only the rule is the test's."""
    need(os.geteuid() == 0, "the test bind-mounts the L2 directory with its own atime rule: needs root")
    where.mkdir(parents=True)
    subprocess.run(["mount", "--bind", str(where), str(where)], check=True)
    try:
        subprocess.run(["mount", "-o", f"remount,bind,{rule}", str(where)], check=True)
        # The kernel lists relatime but never strictatime: strictatime is neither relatime nor noatime.
        listed = mount_options(where)
        atime_rules = {"relatime", "noatime"} & set(listed)
        assert atime_rules == ({"relatime"} if rule == "relatime" else set()), (rule, listed)
        yield where
    finally:
        if subprocess.run(["umount", str(where)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], check=False)


def serve_after_one_read(
    work: Path, name: str, record_hits: bool, l2_volume: Path
) -> tuple[dict, list[tuple[int, ...]], invariants.Pod, int]:
    """Store, read each chunk file once (the first read after a write, which relatime records), serve the
    prompt again: the lookup's verdict, (atime, mtime) before and after per chunk file, and when the lookup
    started."""
    # Without recording, LMCache's own reader (integrity off too: the chart then renders LMCache's fs
    # connector); with it, the chart's plugin as it ships (verifying).
    overlay = {
        "cache": {
            "l2": {
                "integrity": record_hits,
                "eviction": {"recordHits": record_hits, "hitIntervalSeconds": 0},
            }
        }
    }
    engine = rendered.render_engine([tiers.CPU_VALUES], overlay, work / name / "render")
    pod = invariants.pod_case(engine, l2_volume, work / name, TINY)
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


@pytest.mark.parametrize("rule", ["relatime", "strictatime"])
def test_a_hit_moves_atime_only_as_the_mount_rules_without_recording(work: Path, rule: str, need) -> None:
    with atime_mount(work / f"plain-{rule}" / "l2", rule, need) as l2:
        found, times, _, _ = serve_after_one_read(work, f"plain-{rule}", False, l2)
    assert found["hit_tokens"] == 512 and found["data_ok"] is True, found
    for atime_before, mtime_before, atime_after, mtime_after in times:
        assert atime_before > mtime_before, "the test's own first read after the write must have set atime"
        assert mtime_after == mtime_before
        if rule == "relatime":
            assert atime_after == atime_before, "relatime: no second update, LMCache's read leaves no trace"
        else:
            assert atime_after > atime_before, "strictatime: LMCache's read of the chunk moves atime"


def test_recorded_hits_set_atime_and_keep_the_write_time(work: Path, need) -> None:
    with atime_mount(work / "recorded" / "l2", "relatime", need) as l2:
        found, times, pod, lookup_started = serve_after_one_read(work, "recorded", True, l2)
    config = Path(pod.case["config"]).read_text()
    assert "remote_url" not in config and "KvtierFSConnector" in config  # loaded as LMCache's plugin
    assert found["hit_tokens"] == 512 and found["data_ok"] is True and found["error"] is None, found
    for atime_before, mtime_before, atime_after, mtime_after in times:
        assert mtime_after == mtime_before, "the write time eviction relies on must not move"
        assert atime_after >= lookup_started > atime_before, "each served chunk's atime is the hit's time"
