"""benchmarks/curvine_hit_trace.py's strace accounting, without Curvine or engines: which calls count as the
L2's and under which kind."""

from __future__ import annotations

from typing import Any

import pytest

from harness import benchmark_scripts

# strace -f -tt -T as it writes one chunk read (pid 10) beside a read of another file by a second thread.
TRACE = """\
10 06:00:00.000001 newfstatat(AT_FDCWD, "/w/pod-b-l2/ns/k1.data", {st_mode=S_IFREG, ...}, 0) = 0 <0.002000>
10 06:00:00.000002 openat(AT_FDCWD, "/w/pod-b-l2/ns/k1.data", O_RDONLY|O_CLOEXEC) = 7 <0.003000>
11 06:00:00.000003 openat(AT_FDCWD, "/etc/hosts", O_RDONLY) = 8 <0.000100>
10 06:00:00.000004 ioctl(7, TCGETS, 0x7ffd) = -1 ENOTTY (Inappropriate ioctl for device) <0.000500>
10 06:00:00.000005 read(7,  <unfinished ...>
11 06:00:00.000006 read(8, "127.0.0.1 localhost\\n", 4096) = 20 <0.000050>
10 06:00:00.000007 <... read resumed>"\\x00\\x01", 1048576) = 1048576 <0.004000>
10 06:00:00.000008 close(7) = 0 <0.001000>
10 06:00:00.000009 read(7, "", 10) = 0 <0.009000>
11 06:00:00.000010 close(8) = 0 <0.000010>
"""


@pytest.fixture(scope="module")
def trace() -> Any:
    return benchmark_scripts.load("curvine_hit_trace")


def test_split_calls_are_joined_with_their_time(trace: Any) -> None:
    calls = trace.calls(TRACE)
    reads = [c for c in calls if c[1] == "read" and c[0] == 10]
    assert reads[0][3] == "1048576" and reads[0][4] == pytest.approx(0.004)


def test_only_calls_on_l2_paths_and_their_descriptors_count(trace: Any) -> None:
    tgids = {10: 10, 11: 10}  # two threads of one process share descriptors
    got = trace.l2_sums(TRACE, ["/w/pod-b-l2"], tgids)
    kinds = got["kinds"]
    assert kinds["lookup/stat"] == {"count": 1, "ms": pytest.approx(2.0)}
    assert kinds["open"] == {"count": 1, "ms": pytest.approx(3.0)}
    # the read of fd 8 (/etc/hosts) and the read of fd 7 after its close are not the L2's
    assert kinds["read"] == {"count": 1, "ms": pytest.approx(4.0)}
    assert kinds["close"]["count"] == 1
    assert kinds["other"] == {"count": 1, "ms": pytest.approx(0.5)}  # the ioctl
    assert got["chunk_files_opened"] == 1


def test_master_audit_lines_are_counted_per_command(trace: Any, tmp_path: Any) -> None:
    log = tmp_path / "m1.log"
    log.write_text("old cmd=FileStatus ok=true usedUs=5 audit.rs\n")
    sizes = trace.log_sizes(tmp_path)
    with log.open("a") as handle:
        handle.write("2026/12/07 INFO audit.rs:81 cmd=FileStatus ok=true ip=127.0.0.1 usedUs=40\n")
        handle.write("2026/12/07 INFO audit.rs:81 cmd=FileStatus ok=true ip=127.0.0.1 usedUs=60\n")
        handle.write("2026/12/07 INFO audit.rs:81 cmd=GetMasterInfo ok=false ip=127.0.0.1 usedUs=2\n")
    assert trace.master_rpcs(sizes) == {"FileStatus": {"count": 2, "ms": pytest.approx(0.1)}}
