"""The rig's process stop (engine_rig/processes.py): a group killed leaves none of its /dev/shm segments."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

from kvtier.engine_rig import processes

# A child that maps a shared-memory file the way vLLM's message queues do, then sleeps until it is killed.
CHILD = """
import mmap, os, sys, time
path = sys.argv[1]
fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
os.ftruncate(fd, 4096)
region = mmap.mmap(fd, 4096)
open(path + ".ready", "w").close()
time.sleep(600)
"""


def test_stop_removes_the_segments_the_group_mapped(tmp_path: Path, need) -> None:
    need(Path("/dev/shm").is_dir(), "no /dev/shm on this machine")
    segment = Path("/dev/shm") / f"kvtier-test-{uuid.uuid4().hex[:12]}"
    unrelated = Path("/dev/shm") / f"kvtier-test-{uuid.uuid4().hex[:12]}"
    unrelated.write_bytes(b"x")  # someone else's: not mapped by the group, so kept
    try:
        process = processes.start(
            "shm-child", [sys.executable, "-c", CHILD, str(segment)], {}, tmp_path, "http://127.0.0.1:9"
        )
        ready = Path(f"{segment}.ready")
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), process.tail()
        assert segment in processes.shm_segments(process.popen.pid)
        processes.stop(process, grace_s=0.1)
        assert not segment.exists() and unrelated.exists()
    finally:
        for path in (segment, unrelated, Path(f"{segment}.ready")):
            path.unlink(missing_ok=True)
