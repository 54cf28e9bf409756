"""The soak against a release in a cluster (kvtier.load.soak has the faults and the table).

Faults act through the API server, with the rights `kubectl delete pod` and `kubectl exec` need:
- `kill-engine`, `kill-router`: a forced delete (grace 0) of one pod, as a node or OOM kill ends it; the
  fault lasts until its Deployment's replacement is Ready;
- chunk damage, `l2-gone` and the eviction run: soak_pod.py and the chart's l2_evict.py, sent to an
  engine pod and run there, where the L2 volume is mounted, on the model namespace its LMCache config names.

- `curvine-leader`, `curvine-worker`: the Curvine L2's Raft leader master (named by `cv report json` in a
  master pod, kvtier.curvine_report) deleted as an eviction deletes it, or one worker pod forced (grace 0);
  its pods are found by charts/curvine's labels in their own namespace (CurvinePods). The fault lasts
  until the replacement is Ready and, for the leader, a report names a leader again.

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

from kvtier import curvine_report, waiting
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
# Curvine v0.4.1 elects after 10-30 ticks of a second without a leader (journal_conf.rs,
# raft_min/max_election_ticks); a report may fail or name none meanwhile.
ELECTED_TIMEOUT_S = 180.0
REPORT_TIMEOUT_S = 30  # one `cv report json` (the client retries a dead master for far longer)


@dataclass(frozen=True)
class CurvinePods:
    """Where the L2's Curvine runs: its namespace and the label selectors of its masters and workers
    (charts/curvine's labels; the umbrella's subchart runs in the release's namespace)."""

    namespace: str
    masters: str
    workers: str | None  # None: the masters' selector names no component to swap for the workers'

    @classmethod
    def from_masters(cls, namespace: str, masters: str) -> CurvinePods:
        return cls(namespace, masters, curvine_report.component_selector(masters, "worker"))


@dataclass
class ReleaseSubject:
    """soak.Subject on a release: its pods by the release's selectors, the L2 through an engine pod."""

    new_api: Callable[[], Any]  # a CoreV1Api; one per thread (kubernetes.stream patches its client)
    namespace: str
    selectors: reach.Selectors
    mount: str | None  # the engines' L2 mount (reach.l2_path); None: no filesystem L2
    routers_by_service: bool  # clients reach the routers through a Service URL, not port-forwards
    curvine: CurvinePods | None = None  # None: no Curvine to fault (its faults are refused)
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
        if fault in soak.CURVINE_FAULTS and self.curvine is None:
            return (
                "no Curvine master found (charts/curvine's labels, in --curvine-namespace, default the "
                "release's): name them with --curvine-namespace and --curvine-selector"
            )
        if fault == "curvine-worker" and self.curvine is not None and self.curvine.workers is None:
            return (
                f"--curvine-selector {self.curvine.masters!r} has no app.kubernetes.io/component=master term "
                "to swap for the workers' (charts/curvine's labels): give one that has"
            )
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
        """Force-delete the last Ready pod of `selector`."""
        pods = reach.find(self.api, self.namespace, selector, ("http",), what)
        self._replace(self.namespace, selector, pods[-1].pod, len(pods), what, killed, grace=0)

    def _listed(self, namespace: str, selector: str) -> list[Any]:
        return list(self.api.list_namespaced_pod(namespace, label_selector=selector).items)

    def _replace(
        self, namespace: str, selector: str, victim: str, ready_before: int, what: str,
        killed: Callable[[], None], grace: int | None,
    ) -> None:  # fmt: skip
        """Delete pod `victim` (forced with grace 0; None: its own grace period); `killed()` once the API no
        longer lists that pod; return once `ready_before` pods of `selector` are Ready without it. A pod is
        the victim by name and uid: a StatefulSet's replacement comes back under the same name."""
        uids = {p.metadata.name: p.metadata.uid for p in self._listed(namespace, selector)}
        if victim not in uids:
            raise RigError(f"{what} pod {victim} is not among the pods {selector!r} selects in {namespace}")
        uid = uids[victim]

        def is_victim(pod: Any) -> bool:
            return bool(pod.metadata.name == victim and pod.metadata.uid == uid)

        if grace is None:
            self.api.delete_namespaced_pod(victim, namespace)
        else:
            self.api.delete_namespaced_pod(victim, namespace, grace_period_seconds=grace)
        how = "its delete" if grace is None else "its forced delete"
        waiting.wait_until(
            lambda: not any(is_victim(p) for p in self._listed(namespace, selector)),
            deadline=waiting.deadline_in(soak.CONFIRM_S + (grace or 0)),
            fail=lambda _: RigError(f"{what} pod {victim} still listed {soak.CONFIRM_S:g} s after {how}"),
            interval=0.5,
        )
        killed()

        def replaced() -> bool:
            ready = [p for p in self._listed(namespace, selector) if reach.is_ready(p) and not is_victim(p)]
            return len(ready) >= ready_before

        waiting.wait_until(
            replaced,
            deadline=waiting.deadline_in(REPLACED_TIMEOUT_S),
            fail=lambda _: RigError(
                f"no Ready replacement for {what} pod {victim} in {REPLACED_TIMEOUT_S:.0f} s"
            ),
            interval=1.0,
        )

    def kill_curvine(self, part: str, killed: Callable[[], None]) -> None:
        why = self.unsupported(f"curvine-{part}")
        if why:
            raise RigError(why)
        assert self.curvine is not None
        where = self.curvine
        if part == "worker":
            assert where.workers is not None
            workers = sorted(
                p.metadata.name for p in self._listed(where.namespace, where.workers) if reach.is_ready(p)
            )
            if not workers:
                raise RigError(f"no Ready Curvine worker pod in {where.namespace} matches {where.workers!r}")
            self._replace(
                where.namespace, where.workers, workers[-1], len(workers), "Curvine worker", killed, 0
            )
            return
        masters = self._ready_masters()
        leader = self.curvine_leader(masters)
        if not leader:
            raise RigError(
                f"no Curvine master of {', '.join(masters)} named a Raft leader (`cv report json`)"
            )
        # Its own grace period, as an eviction or a rolling upgrade deletes a master.
        self._replace(where.namespace, where.masters, leader, len(masters), "Curvine leader", killed, None)
        waiting.wait_until(
            lambda: bool(self.curvine_leader(self._ready_masters())),
            deadline=waiting.deadline_in(ELECTED_TIMEOUT_S),
            fail=lambda _: RigError(
                f"no Curvine master named a leader {ELECTED_TIMEOUT_S:.0f} s after the new one was Ready"
            ),
            interval=1.0,
        )

    def _ready_masters(self) -> list[str]:
        assert self.curvine is not None
        listed = self._listed(self.curvine.namespace, self.curvine.masters)
        masters = sorted(p.metadata.name for p in listed if reach.is_ready(p))
        if not masters:
            raise RigError(
                f"no Ready Curvine master pod in {self.curvine.namespace} matches {self.curvine.masters!r}"
            )
        return masters

    def curvine_leader(self, masters: Sequence[str]) -> str:
        """The Raft leader's pod as the first master that answers `cv report json` names it; "" when none
        answers or names one (an election under way)."""
        assert self.curvine is not None
        for pod in masters:
            try:
                out = exec_text(self.api, self.curvine.namespace, pod, curvine_report.REPORT_SCRIPT)
                return curvine_report.leader_pod(curvine_report.parse(out))
            except Exception:  # that master is gone or has no leader to ask yet: try the next
                continue
        return ""

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


def exec_text(api: Any, namespace: str, pod: str, script: str) -> str:
    """`sh -c script` in `pod`'s first container through the API server; its stdout."""
    from kubernetes.stream import stream

    command = ["timeout", str(REPORT_TIMEOUT_S), "sh", "-c", script]
    return str(
        stream(
            api.connect_get_namespaced_pod_exec, pod, namespace, command=command,
            stderr=False, stdin=False, stdout=True, tty=False,
        )
    )  # fmt: skip


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
