"""How much CPU a process got and how long it waited for one, from the kernel's per-thread schedstat: the
Curvine read benchmarks charge each chunk's CPU to the worker and the FUSE client with it."""

from __future__ import annotations

from pathlib import Path


def sched_ms(pid: int) -> dict[str, float]:
    """A process's CPU time and time spent runnable but waiting for a CPU, all its threads (schedstat)."""
    total = {"run_ms": 0.0, "wait_ms": 0.0}
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            run, wait, _ = stat.read_text().split()
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
        total["run_ms"] += int(run) / 1e6
        total["wait_ms"] += int(wait) / 1e6
    return total
