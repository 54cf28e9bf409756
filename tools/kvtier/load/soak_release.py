"""The soak against a release in a cluster (kvtier.load.soak has the faults and the table).

Faults act through the API server, with the rights `kubectl delete pod` and `kubectl exec` need:
- `kill-engine`, `kill-router`: a forced delete (grace 0) of one pod, as a node or OOM kill ends it; the
  fault lasts until its Deployment's replacement is Ready;
- chunk damage, `l2-gone` and the eviction run: soak_pod.py and the chart's l2_evict.py, sent to an
  engine pod and run there, where the L2 volume is mounted, on the model namespace its LMCache config names.

Refused here, with the reason: `l2-full` and `l2-read-only` (the L2 pool is shared by every release on it;
filling or remounting it is not a soak's to do), and `kill-router` when the clients reach the routers
through port-forwards (a forward follows one pod, not the Service: give --router-url where it resolves).

Damage and eviction change the cache the release serves from (never what it answers, with
cache.l2.integrity on): run it against a staging release.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvtier import waiting
from kvtier.engine_rig.errors import RigError
from kvtier.load import driver, soak, soak_pod
from kvtier.podscripts import l2_evict
from kvtier.smoke import reach

REFUSED = {
    "l2-full": "the L2 pool is shared by every release on it: a soak does not fill it (the rig does: --rig)",
    "l2-read-only": "remounting the L2 volume needs the node, not a pod: the rig does it (--rig)",
}
LEDGER_INTERVAL_S = 2.0  # each sample of the chunk files is an exec into an engine pod
REPLACED_TIMEOUT_S = 900.0  # a killed engine's replacement loads its model before it is Ready


@dataclass
class ReleaseSubject:
    """soak.Subject on a release: its pods by the release's selectors, the L2 through an engine pod."""

    new_api: Callable[[], Any]  # a CoreV1Api; one per thread (kubernetes.stream patches its client)
    namespace: str
    selectors: reach.Selectors
    mount: str | None  # the engines' L2 mount (reach.l2_path); None: no filesystem L2
    routers_by_service: bool  # clients reach the routers through a Service URL, not port-forwards
    _local: threading.local = field(default_factory=threading.local, init=False)

    @property
    def api(self) -> Any:
        if not hasattr(self._local, "api"):
            self._local.api = self.new_api()
        return self._local.api

    def unsupported(self, fault: str) -> str:
        if fault in REFUSED:
            return REFUSED[fault]
        if fault == "kill-router" and not self.routers_by_service:
            return (
                "the clients reach each router pod through a port-forward, which dies with its pod: give "
                "--router-url with the router Service's address, from where it resolves (inside the cluster)"
            )
        if fault in (*soak_pod.DAMAGES, "evict", "l2-gone") and self.mount is None:
            return "the engines mount no filesystem L2 (no l2cache volume, no fs:// remote_url)"
        return ""

    def _engines(self) -> list[reach.PodPort]:
        return reach.find(self.api, self.namespace, self.selectors.engine, ("http",), "engine")

    def _run(self, source: str, *args: str) -> dict[str, Any]:
        return reach.exec_json(self.api, self.namespace, self._engines()[0], ["python3", "-c", source, *args])

    def _pod(self, *args: str) -> dict[str, Any]:
        assert self.mount is not None
        return self._run(SOAK_POD, *args, "--mount", self.mount)

    def clock_ns(self) -> int:
        return int(self._pod("now")["now_ns"]) if self.mount else time.time_ns()

    def kill_engine(self, killed: Callable[[], None]) -> None:
        self._kill(self.selectors.engine, "engine", killed)

    def kill_router(self, killed: Callable[[], None]) -> None:
        self._kill(self.selectors.router, "router", killed)

    def _kill(self, selector: str, what: str, killed: Callable[[], None]) -> None:
        """Force-delete the last Ready pod of `selector`; `killed()` once the API no longer lists it; return
        once as many are Ready without it."""
        pods = reach.find(self.api, self.namespace, selector, ("http",), what)
        victim = pods[-1].pod
        self.api.delete_namespaced_pod(victim, self.namespace, grace_period_seconds=0)

        def deleted() -> bool:
            listed = self.api.list_namespaced_pod(self.namespace, label_selector=selector).items
            return all(p.metadata.name != victim for p in listed)

        waiting.wait_until(
            deleted,
            deadline=waiting.deadline_in(soak.CONFIRM_S),
            fail=lambda _: RigError(
                f"{what} pod {victim} still listed {soak.CONFIRM_S:g} s after its forced delete"
            ),
            interval=0.5,
        )
        killed()

        def replaced() -> bool:
            listed = self.api.list_namespaced_pod(self.namespace, label_selector=selector).items
            ready = [p for p in listed if reach.is_ready(p) and p.metadata.name != victim]
            return len(ready) >= len(pods)

        waiting.wait_until(
            replaced,
            deadline=waiting.deadline_in(REPLACED_TIMEOUT_S),
            fail=lambda _: RigError(
                f"no Ready replacement for {what} pod {victim} in {REPLACED_TIMEOUT_S:.0f} s"
            ),
            interval=1.0,
        )

    def damage(self, kind: str, rng: random.Random, since_ns: int, known: Sequence[str]) -> str | None:
        # One `--known=...` word: the API server's exec drops an empty argument (no known names).
        aim = ["--since-ns", str(since_ns), f"--known={','.join(known)}", "--seed", str(rng.randrange(2**31))]
        name = self._pod("damage", "--kind", kind, *aim)["name"]
        return str(name) if name else None

    def evict(self) -> bool:
        assert self.mount is not None
        report = self._run(L2_EVICT, "--dir", self.mount, "--high", "0", "--low", "0", "--min-age", "0")
        return soak.evicted(report)

    def chunk_names(self) -> list[str]:
        return [str(name) for name in self._pod("list")["names"]] if self.mount else []

    def rejected(self) -> int:
        total = 0
        for engine in self._engines():
            log = self.api.read_namespaced_pod_log(engine.pod, self.namespace, container=engine.container)
            total += str(log).count(soak.REJECTED)
        return total

    @contextmanager
    def volume_fault(self, fault: str) -> Iterator[None]:
        why = self.unsupported(fault)
        if why:
            raise RigError(why)
        moved = self._pod("away")
        try:
            if not moved.get("gone"):  # an engine made the folder again with those files: not away yet
                waiting.wait_until(
                    lambda: self._pod("gone").get("gone"),
                    deadline=waiting.deadline_in(soak.CONFIRM_S),
                    fail=lambda _: RigError(
                        f"{moved.get('dir')} still listed {soak.CONFIRM_S:g} s after it was moved away"
                    ),
                )
            yield
        finally:
            self._pod("back")


def _settled(subject: ReleaseSubject, patience_s: float = 10.0) -> set[str]:
    """The chunk files once LMCache's stores (after each request) have stopped adding any for a second."""
    names = set(subject.chunk_names())
    deadline = time.monotonic() + patience_s
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = set(subject.chunk_names())
        if now == names:
            break
        names = now
    return names


def references(
    subject: ReleaseSubject, reference: driver.Target, plan: list[soak.Planned], work_dir: Path,
    log: Callable[[str], None],
) -> dict[tuple[int, ...], str]:  # fmt: skip
    """Each prompt's greedy answer from `reference`, one request at a time, point by point. When that is
    the release itself its L2 now holds the prompts' chunks, which a point's requests read rather than
    write: each point's new chunk files become its `known` ones, for chunk damage to aim at."""
    answers: dict[tuple[int, ...], str] = {}
    for index, planned in enumerate(plan):
        before = set(subject.chunk_names())
        answers |= soak.reference_answers(reference, planned.requests, planned.mix, work_dir / str(index))
        planned.known = sorted(_settled(subject) - before)
        log(
            f"references of {planned.fault}: {len(planned.requests)} prompts, {len(planned.known)} new chunks"
        )
    return answers


def run(
    subject: ReleaseSubject, target: driver.Target, reference: driver.Target, plan: list[soak.Planned],
    qps: float, work_dir: Path, log: Callable[[str], None],
) -> list[dict[str, Any]]:  # fmt: skip
    """The references, then one row per point of `plan` against the release."""
    answers = references(subject, reference, plan, work_dir / "reference", log)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="soak-faults") as runner:
        return soak.points(
            subject, target, plan, answers, qps, work_dir, log, runner, ledger_interval_s=LEDGER_INTERVAL_S
        )


SOAK_POD = Path(soak_pod.__file__).read_text()
L2_EVICT = Path(l2_evict.__file__).read_text()
