"""The soak on the CPU rig: replicas of values/cpu.yaml's rendered container on one L2 and round-robin
router replicas in front (kvtier.load.soak has the faults and the table).

References come from a replica with no cache at all (tier set `none`: prefix caching, L1 and L2 off), one
request at a time. A killed engine or router is restarted on its address, as the kubelet restarts a
container; the rig has no Service, so a router's own client sends to it while it is down. `l2-full` and
`l2-read-only` need the L2 on a volume of its own: a tmpfs mounted for the run (root only; without it
those faults report why).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig import tiers as tier_rig
from kvtier.engine_rig.errors import RigError
from kvtier.load import driver, routing, soak, soak_pod, workload
from kvtier.load.experiment import RIG_L0_BLOCKS, FreshPrompts
from kvtier.podscripts import l2_evict

MOUNTED_FAULTS = ("l2-full", "l2-read-only")  # they need the L2 on a volume of its own (l2_volume)
L2_VOLUME_SIZE = "2g"  # the soak's L2 tmpfs: room for every point's chunks (RAM only as filled)
BALLAST = ".soak-ballast"
# The rig's L2 is a folder on this machine, not a Curvine cluster: nothing of Curvine's to delete.
REFUSED = {
    fault: "the rig's L2 is a local folder, with no Curvine master or worker to delete: run it against a "
    "release whose L2 is on Curvine (leave out --rig)"
    for fault in soak.CURVINE_FAULTS
}


@dataclass
class RigSubject:
    """soak.Subject on the rig: its replicas, its router replicas and its L2 directory."""

    rig: tier_rig.TieredRig
    routers: routing.RouterReplicas

    @property
    def namespace(self) -> Path:
        assert self.rig.l2_dir is not None, "the rig is started"
        return self.rig.l2_dir

    def unsupported(self, fault: str) -> str:
        if fault in REFUSED:
            return REFUSED[fault]
        if fault in MOUNTED_FAULTS and not os.path.ismount(self.namespace.parent):
            return f"the L2 {self.namespace.parent} is not a volume of its own (mounting one needs root)"
        return ""

    def clock_ns(self) -> int:
        return time.time_ns()

    def kill_engine(self, killed: Callable[[], None]) -> None:
        self.rig.kill_and_restart(1, killed)  # killed() once the process has exited (reaped)

    def kill_router(self, killed: Callable[[], None]) -> None:
        self.routers.kill_and_restart(0, killed)

    def kill_curvine(self, part: str, killed: Callable[[], None]) -> None:
        raise RigError(REFUSED[f"curvine-{part}"])

    def damage(self, kind: str, rng: random.Random, since_ns: int, known: Sequence[str]) -> str | None:
        return soak_pod.damage(self.namespace, kind, since_ns, rng, set(known))

    def evict(self) -> bool:
        """One run of the eviction job's script as the CronJob runs it (its own process)."""
        argv = [sys.executable, str(Path(l2_evict.__file__)), "--dir", str(self.namespace.parent)]
        argv += ["--high", "0", "--low", "0", "--min-age", "0"]
        printed = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.strip()
        return bool(printed) and soak.evicted(json.loads(printed.splitlines()[-1]))

    def chunk_names(self) -> list[str]:
        return soak_pod.chunk_names(self.namespace)

    def rejected(self) -> int:
        logs = (self.rig.work_dir / "logs").glob("*.log")
        return sum(path.read_text(errors="replace").count(soak.REJECTED) for path in logs)

    @contextmanager
    def volume_fault(self, fault: str) -> Iterator[None]:
        why = self.unsupported(fault)
        if why:
            raise RigError(why)
        volume = self.namespace.parent
        if fault == "l2-gone":
            soak_pod.away(self.namespace)
            try:
                _confirm(fault, lambda: soak_pod.gone(self.namespace), "its namespace is still listed")
                yield
            finally:
                soak_pod.back(self.namespace)
        elif fault == "l2-full":  # a ballast file beside the namespaces takes every free block
            ballast = volume / BALLAST
            try:
                # The engines free blocks too (a refused write's temp file is removed): fill until refused.
                _confirm(fault, lambda: _filled(ballast, volume), "a write still fits")
                yield
            finally:
                ballast.unlink(missing_ok=True)
        else:
            _mount("remount,ro", volume)
            try:
                _confirm(fault, lambda: refused(volume, errno.EROFS, errno.EACCES), "a write still succeeds")
                yield
            finally:
                _mount("remount,rw", volume)


PROBE = ".soak-probe"


def refused(volume: Path, *errnos: int) -> bool:
    """Whether a new file of two pages on `volume` is refused with one of `errnos` (the fault in force);
    the probe is removed when it was written."""
    probe = volume / PROBE
    try:
        with open(probe, "wb") as f:
            f.write(b"\0" * 8192)
            f.flush()
            os.fsync(f.fileno())
    except OSError as error:
        with contextlib.suppress(OSError):  # created empty on a full volume; never on a read-only one
            probe.unlink()
        if error.errno in errnos:
            return True
        raise
    probe.unlink()
    return False


def _confirm(fault: str, in_force: Callable[[], bool], otherwise: str, interval_s: float = 0.2) -> None:
    """Until `in_force()` says so; RigError after soak.CONFIRM_S (the row's fault_error)."""
    deadline = time.monotonic() + soak.CONFIRM_S
    while not in_force():
        if time.monotonic() > deadline:
            raise RigError(f"{fault} not confirmed in force within {soak.CONFIRM_S:g} s: {otherwise}")
        time.sleep(interval_s)


def _fill(ballast: Path, step: int = 64 << 20) -> None:
    """Grow `ballast` until its volume has no block left: by `step`, halved at each ENOSPC down to a page
    (the engines keep writing meanwhile, so the free space read once would not be the space left). A
    second call grows it further (blocks freed meanwhile)."""
    with open(ballast, "ab") as f:
        size = os.fstat(f.fileno()).st_size
        while step >= 4096:
            try:
                os.posix_fallocate(f.fileno(), size, step)
                size += step
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                step //= 2


def _filled(ballast: Path, volume: Path) -> bool:
    """Grow the ballast once more; whether a write on `volume` is now refused with ENOSPC."""
    _fill(ballast)
    return refused(volume, errno.ENOSPC)


def _mount(options: str, volume: Path) -> None:
    proc = subprocess.run(["mount", "-o", options, str(volume)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RigError(f"mount -o {options} {volume}: {proc.stderr.strip()}")


@contextmanager
def l2_volume(path: Path, size: str = L2_VOLUME_SIZE) -> Iterator[str]:
    """`path` as a tmpfs of its own for the block; yields "" when mounted, or why it could not be."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        yield f"cannot mount a tmpfs for the L2 volume: {mounted.stderr.strip() or mounted.returncode}"
        return
    try:
        yield ""
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


def references(
    requests: list[workload.Request], mix: workload.Mix, work_dir: Path, log: Callable[[str], None]
) -> dict[tuple[int, ...], str]:
    """Each prompt's greedy answer from a replica with no cache, one request at a time."""
    with tier_rig.TieredRig(work_dir, replicas=1, tiers=tier_rig.NO_CACHE, log=log) as reference:
        url = reference.started[0].url
        tokenizer = str(work_dir / "models" / engine_rig.MODEL_NAME)
        target = driver.Target([url], engine_rig.MODEL_NAME, tokenizer, [url], offline=True)
        return soak.reference_answers(target, requests, mix, work_dir / "run")


def run(
    faults: list[str], mix: workload.Mix, qps: float, work_dir: Path, log: Callable[[str], None],
    replicas: int = 3, router_replicas: int = 2, timing: soak.Timing | None = None, integrity: bool = True,
    backend: str = tier_rig.LMCACHE,
) -> list[dict[str, Any]]:  # fmt: skip
    """One row per fault, in order, on one rig of `backend` (cache.backend); `integrity` False turns the
    chart's sealed chunk files off, to show what the check is there for."""
    soak.check_faults(faults)
    refused = [f"{fault}: {REFUSED[fault]}" for fault in faults if fault in REFUSED]
    if refused:  # said before anything starts
        raise RigError("on the rig, " + "; ".join(refused))
    plan = soak.plan(faults, FreshPrompts(mix))
    everything = [request for planned in plan for request in planned.requests]
    log(f"references: {len(everything)} prompts, one at a time on a replica without cache")
    answers = references(everything, mix, work_dir / "reference", log)
    engine_args = ("--num-gpu-blocks-override", str(RIG_L0_BLOCKS))
    rig_dir = work_dir / "rig"
    flags, _source = routing.flags("roundrobin")
    with ExitStack() as stack:
        # Every fault runs on one thread that outlives the rig (soak.FaultThread).
        runner = stack.enter_context(ThreadPoolExecutor(max_workers=1, thread_name_prefix="soak-faults"))
        if any(fault in MOUNTED_FAULTS for fault in faults):
            unmounted = stack.enter_context(l2_volume(rig_dir / tier_rig.SHARED_L2))
            if unmounted:
                log(f"{unmounted}: {', '.join(MOUNTED_FAULTS)} will report it")
        rig = stack.enter_context(
            tier_rig.TieredRig(
                rig_dir,
                replicas=replicas,
                engine_args=engine_args,
                integrity=integrity,
                backend=backend,
                log=log,
            )
        )
        engines = [p.url for p in rig.started]
        routers = stack.enter_context(
            routing.RouterReplicas("roundrobin", flags, engines, router_replicas, rig_dir)
        )
        tokenizer = str(rig_dir / "models" / engine_rig.MODEL_NAME)
        target = driver.Target(routers.urls, engine_rig.MODEL_NAME, tokenizer, engines, offline=True)
        subject = RigSubject(rig, routers)
        return soak.points(subject, target, plan, answers, qps, rig_dir, log, runner, timing or soak.Timing())
