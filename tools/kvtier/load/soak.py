"""The soak: the load benchmark's mix under faults, every answer held to its reference (docs/reliability.md).

References: each prompt's greedy answer, computed before the faults (soak_rig: a replica with no cache at
all; soak_release: a cacheless server the user names, or the release itself one request at a time). Then
each fault gets fresh prompts of the mix, sent through the router replicas as the load benchmark sends
them, and a fault thread that acts on a Subject (the rig or a release). A fault counts only from when the
subject confirms it in force (the process exited, the pod no longer listed, the namespace absent, a write
refused): a volume fault is confirmed before the point's load starts, the others start `at_s` into it.

- `none`: nothing (the baseline: wrong answers here would mean the oracle is unsound);
- `kill-engine`, `kill-router`: one replica killed (SIGKILL, or a forced pod delete) and replaced;
- `change-chunks`, `truncate-chunks`, `delete-chunks`: every `interval_s` a random chunk file of the
  point's own prompts is changed in place (64 bytes inverted, size kept), cut to half, or removed
  (eviction racing its reader; soak_pod.damage);
- `evict`: the chart's eviction script at aggressive watermarks (down to nothing, no minimum age) in a loop;
- `l2-gone`: the model's L2 namespace moved away, then back after `hold_s` of load;
- `l2-full`, `l2-read-only`: the L2 volume filled to ENOSPC, or made read-only, for `hold_s` of load;
- `curvine-leader`, `curvine-worker`: the Curvine L2's Raft leader master, or one worker, deleted, until its
  replacement is Ready (and a report names a leader again). No replica is down: the engines must answer
  through it (an L2 read that fails is a recompute), so its failures are not excused as a kill's are.

Per fault: requests, failed (answers cut short included, and how many of those were sent while a killed
replica was down), answers that differ from their reference, chunks the plugin refused (its engine log
lines), chunks lost that neither the eviction policy nor the fault itself removed (ChunkLedger), time to
recover.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig.errors import RigError
from kvtier.load import driver, soak_pod, workload
from kvtier.load.experiment import FreshPrompts

# A request unanswered this long counts as failed: a soak request takes seconds on the rig, and one in
# flight on a killed engine was seen never to be answered through the router.
REQUEST_TIMEOUT_S = 60.0
# The log words for a refused chunk (podscripts/l2_connector.py, l2_native.py).
REJECTED = "failed verification"
FAULTS = (
    "none", "kill-engine", "change-chunks", "truncate-chunks", "delete-chunks", "evict", "kill-router",
    "l2-gone", "l2-full", "l2-read-only", "curvine-leader", "curvine-worker",
)  # fmt: skip
CURVINE_FAULTS = {"curvine-leader": "leader", "curvine-worker": "worker"}  # -> the part Subject deletes
VOLUME_FAULTS = {"l2-gone": "away_s", "l2-full": "full_s", "l2-read-only": "read_only_s"}  # -> its figure
# How long a subject may take to see its fault in force (a write refused, the pod gone, the process exited):
# filling a 2 GiB tmpfs while engines write took seconds on two loaded cores; past this the row says why.
CONFIRM_S = 120.0
NOTES = ("files_damaged", "eviction_runs", *VOLUME_FAULTS.values())  # a fault's own figures, in its row


@dataclass
class Injection:
    """What a fault thread did: its own figures, when a killed replica was down (for failures), and which
    chunk files it removed itself or had eviction runs remove (for lost chunks)."""

    figures: dict[str, Any] = field(default_factory=dict)
    # (from, to) in time.monotonic(): from the kill's confirmation (process exited, pod no longer listed)
    down: list[tuple[float, float]] = field(default_factory=list)
    removed: set[str] = field(default_factory=set)  # chunk files the fault removed or damaged (by name)
    evicting: list[tuple[float, float]] = field(default_factory=list)  # eviction runs, time.monotonic()
    error: str = ""


@dataclass(frozen=True)
class Timing:
    at_s: float = 3.0  # when a kill, damage or eviction starts, after the point's clients start sending
    interval_s: float = 1.0  # between chunk damages and eviction runs
    # How long a volume fault holds (the namespace away, the L2 full or read-only) once the clients send;
    # it is confirmed in force before they start (the point's load waits for it: FaultThread.armed).
    hold_s: float = 8.0


class Subject(Protocol):
    """Where the faults land: the rig (soak_rig.RigSubject) or a release (soak_release.ReleaseSubject)."""

    def unsupported(self, fault: str) -> str:
        """Why `fault` cannot be injected here, or "" when it can."""

    def clock_ns(self) -> int:
        """Now, on the clock that stamps the L2's files."""

    def kill_engine(self, killed: Callable[[], None]) -> None:
        """Kill one engine replica, call `killed()` once that is confirmed (its process exited, its pod no
        longer listed; RigError past CONFIRM_S), and return once its replacement is ready."""

    def kill_router(self, killed: Callable[[], None]) -> None:
        """kill_engine for one router replica."""

    def kill_curvine(self, part: str, killed: Callable[[], None]) -> None:
        """Delete the Curvine L2's `part` (`leader`: the Raft leader master's pod; `worker`: one worker pod),
        call `killed()` once the API no longer lists that pod, and return once its replacement is Ready (for
        the leader: and a report names a leader again)."""

    def damage(self, kind: str, rng: random.Random, since_ns: int, known: Sequence[str]) -> str | None:
        """soak_pod.damage on one chunk file of this point; its name, or None."""

    def evict(self) -> bool:
        """One run of the chart's eviction script at watermarks 0 and no minimum age; False if it failed."""

    def chunk_names(self) -> list[str]:
        """The model namespace's final chunk files (ChunkLedger's samples)."""

    def rejected(self) -> int:
        """Chunks the engines' plugin refused so far (its log lines)."""

    def volume_fault(self, fault: str) -> AbstractContextManager[None]:
        """`l2-gone`, `l2-full` or `l2-read-only` for the length of the block, entered only once the fault
        is confirmed in force (the namespace absent, a write refused with ENOSPC, or EROFS/EACCES);
        RigError when it is not within CONFIRM_S."""


def evicted(report: dict[str, Any]) -> bool:
    """Whether an eviction run got as far as evicting (l2_evict's report), whatever its watermark verdict:
    with writers racing it at watermark 0 it is seldom `ok`."""
    return "evicted_files" in report


def _every(stop: threading.Event, interval_s: float, action: Callable[[], None]) -> None:
    while not stop.wait(interval_s):
        action()


def _damage(
    subject: Subject, kind: str, rng: random.Random, since_ns: int, known: Sequence[str], result: Injection
) -> None:
    name = subject.damage(kind, rng, since_ns, known)
    if name is not None:
        result.removed.add(name)  # deleted, or refused and removed by the plugin when read
        result.figures["files_damaged"] = result.figures.get("files_damaged", 0) + 1


def _evict(subject: Subject, result: Injection) -> None:
    started = time.monotonic()
    ok = subject.evict()
    result.evicting.append((started, time.monotonic()))
    done = result.figures
    done["eviction_runs"] = done.get("eviction_runs", 0) + 1
    done["eviction_failures"] = done.get("eviction_failures", 0) + (not ok)


def _hold(
    subject: Subject, fault: str, stop: threading.Event, sending: threading.Event | None,
    armed: threading.Event, hold_s: float, figures: dict[str, Any],
) -> None:  # fmt: skip
    """The volume fault, confirmed before the point's load starts (`armed` lets it start), then for `hold_s`
    of sending (or less, when the point ends first); its figure is how long it was in force while the
    clients sent, so a fault confirmed late on a slow machine never shows an empty window as a pass."""
    with subject.volume_fault(fault):
        armed.set()
        while sending is not None and not sending.wait(0.05):
            if stop.is_set():
                figures[VOLUME_FAULTS[fault]] = 0.0
                return
        since = time.monotonic()
        stop.wait(hold_s)
        figures[VOLUME_FAULTS[fault]] = round(time.monotonic() - since, 1)


def _kill(subject: Subject, name: str, result: Injection) -> None:
    """Kill a replica, or a part of the Curvine L2; its recovery counts from the kill's confirmation. Only a
    replica's window excuses failures (`down`): with a Curvine part gone every engine still serves."""
    confirmed: list[float] = []

    def killed() -> None:
        confirmed.append(time.monotonic())

    if name in CURVINE_FAULTS:
        subject.kill_curvine(CURVINE_FAULTS[name], killed)
    else:
        subject.kill_engine(killed) if name == "kill-engine" else subject.kill_router(killed)
    if not confirmed:
        raise RigError(f"{name}: the replica came back, but its kill was never confirmed (no exit seen)")
    back = time.monotonic()
    if name not in CURVINE_FAULTS:
        result.down.append((confirmed[0], back))
    result.figures["recovered_s"] = round(back - confirmed[0], 1)


def inject(
    name: str, subject: Subject, stop: threading.Event, timing: Timing, seed: int, known: Sequence[str] = (),
    sending: threading.Event | None = None, armed: threading.Event | None = None,
) -> Injection:  # fmt: skip
    """Run fault `name` against `subject` until `stop` is set (the point is over); never raises. A volume
    fault is put in force and confirmed first, then `armed` is set (the point's load waits for it); any
    other fault sets `armed` at once and starts `at_s` after `sending` is set (the clients send). `known`:
    chunk files of the point's prompts written before it (chunk damage aims at them too)."""
    result = Injection()
    rng = random.Random(seed)
    armed = armed or threading.Event()
    try:
        point_started = subject.clock_ns()
        if name in VOLUME_FAULTS:
            _hold(subject, name, stop, sending, armed, timing.hold_s, result.figures)
            return result
        armed.set()
        while sending is not None and not sending.wait(0.1):
            if stop.is_set():
                return result
        if name == "none":
            return result
        if stop.wait(timing.at_s):
            raise RigError(f"the point's clients were done before the fault's start ({timing.at_s:g} s in)")
        if name in ("kill-engine", "kill-router", *CURVINE_FAULTS):
            _kill(subject, name, result)
        elif name in soak_pod.DAMAGES:
            _every(stop, timing.interval_s, lambda: _damage(subject, name, rng, point_started, known, result))
        elif name == "evict":
            _every(stop, timing.interval_s, lambda: _evict(subject, result))
        else:
            raise RigError(f"unknown fault {name!r}; expected one of {', '.join(FAULTS)}")
    except Exception as error:  # the row says the fault itself broke; the run goes on
        result.error = f"{type(error).__name__}: {error}"
    finally:
        armed.set()  # a fault that broke holds no load back
    return result


class FaultThread:
    """Fault `name` on the soak's fault thread from start(); wait_armed() returns once the fault lets the
    load start; finish() stops it and waits for it (a killed engine is back when it returns), then
    `injection` holds what it did.

    Every fault runs on one thread that outlives the rig (`runner`): a replica restarted from a thread
    dies with it, since the rig's processes get SIGTERM when the thread that started them exits (Linux's
    parent-death signal follows the thread; engine_rig/processes.py)."""

    def __init__(
        self, planned: Planned, subject: Subject, timing: Timing, seed: int, runner: ThreadPoolExecutor
    ) -> None:
        self.stop = threading.Event()
        self.sending = threading.Event()  # set by the driver once the clients send
        self.armed = threading.Event()  # set by the fault once the load may start
        self.injection = Injection()
        events = (self.stop, timing, seed, planned.known, self.sending, self.armed)
        self._args = (planned.fault, subject, *events)
        self._runner = runner
        self._future: Future[Injection] | None = None

    def start(self) -> None:
        self._future = self._runner.submit(inject, *self._args)

    def wait_armed(self) -> None:
        """Until the fault is in force (a volume fault) or has started waiting for the clients; a subject
        bounds its confirmation by CONFIRM_S, and a fault thread stuck past that holds the load no longer."""
        self.armed.wait(CONFIRM_S + 30.0)

    def finish(self) -> None:
        self.stop.set()
        if self._future is not None:
            self.injection = self._future.result()


@contextmanager
def fault_thread(
    planned: Planned, subject: Subject, timing: Timing, seed: int, runner: ThreadPoolExecutor
) -> Iterator[FaultThread]:
    fault = FaultThread(planned, subject, timing, seed, runner)
    fault.start()
    try:
        yield fault
    finally:
        fault.finish()


class ChunkLedger:
    """Final chunk files that vanished during a point, sampled every `interval_s` from entry to exit (a file
    written and removed between two samples is not seen). lost() names those still gone at exit that the
    fault did not remove or damage itself and that no eviction run could have removed (its run overlapped
    the interval the file vanished in): chunks lost that policy did not evict."""

    def __init__(self, list_names: Callable[[], list[str]], interval_s: float = 0.25) -> None:
        self._list = list_names
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, name="soak-ledger", daemon=True)
        self.present: set[str] = set()
        self.gone: dict[str, tuple[float, float]] = {}  # name -> (last seen, first missed), time.monotonic()
        self.skipped = 0  # samples that could not be taken
        self._sampled = time.monotonic()

    def sample(self) -> None:
        names = set(self._list())
        now = time.monotonic()
        for name in self.present - names:
            self.gone[name] = (self._sampled, now)
        for name in names:
            self.gone.pop(name, None)  # back (healed, or its namespace returned)
        self.present, self._sampled = names, now

    def _sample_until_stopped(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self.sample()
            except Exception:  # no Ready engine pod to list through (a release of one, killed): skip it
                self.skipped += 1

    def __enter__(self) -> ChunkLedger:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def lost(self, injection: Injection) -> list[str]:
        def evictable(vanished: tuple[float, float]) -> bool:
            return any(start <= vanished[1] and vanished[0] <= end for start, end in injection.evicting)

        return sorted(
            name
            for name, vanished in self.gone.items()
            if name not in injection.removed and not evictable(vanished)
        )


# A request sent this long before an engine went down may still have been in flight on it.
IN_FLIGHT_S = 30.0


def _last_line(error: str) -> str:
    """A client's error as its last line: vllm bench serve records a whole traceback, whose end says it."""
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def cut_short(record: dict[str, Any], answers: dict[tuple[int, ...], str]) -> bool:
    """An answer the client took as a success that stops early: a strict prefix of its greedy reference.

    vllm bench serve marks a request ok once any chunk arrived and keeps what streamed, whether or not
    the stream ended with a finish_reason and `data: [DONE]` (docs/reliability.md); the text alone tells a
    truncated answer from a finished one only as a strict prefix of the greedy reference, which a finished
    greedy answer to the same request equals. A careful client fails such a stream: so does the soak."""
    text, reference = record["text"] or "", answers[tuple(record["hash_ids"])]
    return record["ok"] and len(text) < len(reference) and reference.startswith(text)


CUT_SHORT_ERROR = "answer cut short: a strict prefix of its reference, though the client saw no error"


def row(
    fault: str,
    point: driver.Point,
    answers: dict[tuple[int, ...], str],
    injection: Injection,
    rejected: int,
    lost: Sequence[str] = (),
) -> dict[str, Any]:
    """One table row: what failed (errors and answers cut short), when, and which answers are wrong."""

    def while_down(record: dict[str, Any]) -> bool:
        sent = record.get("sent_s")
        return sent is not None and any(a - IN_FLIGHT_S <= sent <= b for a, b in injection.down)

    cut = [r for r in point.records if cut_short(r, answers)]
    failed = [r for r in point.records if not r["ok"]] + cut
    down = [r for r in failed if while_down(r)]
    wrong = [
        r
        for r in point.records
        if r["ok"] and not cut_short(r, answers) and r["text"] != answers[tuple(r["hash_ids"])]
    ]
    errors = {_last_line(r["error"])[:200] for r in failed if not r["ok"]}
    errors |= {CUT_SHORT_ERROR} if cut else set()
    return {
        "fault": fault,
        "requests": len(point.records),
        "failed": len(failed),
        "cut_short": len(cut),
        "failed_while_down": len(down),
        "failed_otherwise": len(failed) - len(down),
        "wrong": len(wrong),
        "wrong_examples": [
            {
                "hash_ids": r["hash_ids"][:3],
                "text": (r["text"] or "")[:200],
                "reference": answers[tuple(r["hash_ids"])][:200],
            }
            for r in wrong[:3]
        ],
        "cut_short_examples": [
            {
                "hash_ids": r["hash_ids"][:3],
                "chars": len(r["text"] or ""),
                "reference_chars": len(answers[tuple(r["hash_ids"])]),
            }
            for r in cut[:3]
        ],
        "errors": sorted(errors)[:3],
        "rejected_chunks": rejected,
        "chunks_lost": len(lost),
        "lost_examples": list(lost[:3]),
        "connector_hit_tokens": point.tiers.get("external_hit_tokens"),
        "fault_error": injection.error,
        **injection.figures,
    }


@dataclass
class Planned:
    """One point of a soak: its fault, fresh prompts of the mix, and chunk files known to be theirs."""

    fault: str
    mix: workload.Mix
    requests: list[workload.Request]
    known: list[str] = field(default_factory=list)  # written before the point (a release's reference pass)


def check_faults(faults: Sequence[str]) -> None:
    unknown = [f for f in faults if f not in FAULTS]
    if unknown:
        raise RigError(f"unknown fault {unknown[0]!r}; expected one of {', '.join(FAULTS)}")


def plan(faults: Sequence[str], prompts: FreshPrompts) -> list[Planned]:
    """Fresh prompts of the mix for each fault: no point reads what an earlier one wrote."""
    return [Planned(fault, *prompts.take()) for fault in faults]


def reference_answers(
    target: driver.Target, requests: list[workload.Request], mix: workload.Mix, work_dir: Path
) -> dict[tuple[int, ...], str]:
    """Each prompt's greedy answer from `target`, one request at a time (a batch of one)."""
    point = driver.run_point(
        engine_rig.engine_python(), target, requests, mix, 1000.0, work_dir, max_concurrency=1,
        request_timeout_s=REQUEST_TIMEOUT_S,
    )  # fmt: skip
    failed = [r for r in point.records if not r["ok"]]
    if failed:
        raise RigError(f"the reference server failed {len(failed)} request(s): {failed[0]['error']}")
    return {tuple(r["hash_ids"]): r["text"] for r in point.records}


def points(
    subject: Subject, target: driver.Target, plan: list[Planned],
    answers: dict[tuple[int, ...], str], qps: float, work_dir: Path, log: Callable[[str], None],
    runner: ThreadPoolExecutor, timing: Timing = Timing(), ledger_interval_s: float = 0.25,
) -> list[dict[str, Any]]:  # fmt: skip
    """One row per point of `plan`, in order, on one `subject` (a fault's damage is the next fault's
    starting L2); faults run on `runner`'s one thread (FaultThread)."""
    rows = []
    for index, planned in enumerate(plan):
        before = subject.rejected()
        with (
            ChunkLedger(subject.chunk_names, ledger_interval_s) as ledger,
            fault_thread(planned, subject, timing, planned.mix.seed + index, runner) as thread,
        ):
            point = driver.run_point(
                engine_rig.engine_python(), target, planned.requests, planned.mix, qps,
                work_dir / f"{index}-{planned.fault}", settle=thread.finish, sending=thread.sending.set,
                request_timeout_s=REQUEST_TIMEOUT_S, armed=thread.wait_armed,
            )  # fmt: skip
        injection = thread.injection
        refused = max(0, subject.rejected() - before)  # a killed pod's log is gone with it
        rows.append(row(planned.fault, point, answers, injection, refused, ledger.lost(injection)))
        if ledger.skipped:  # fewer listings: a chunk lost meanwhile may have gone unseen
            rows[-1]["ledger_skipped"] = ledger.skipped
        log(line(rows[-1]))
    return rows


def line(r: dict[str, Any]) -> str:
    extra = {k: v for k, v in r.items() if k in ("recovered_s", *NOTES)}
    said = f" ({r['fault_error']})" if r["fault_error"] else ""
    return (
        f"{r['fault']}: {r['requests']} requests, {r['failed']} failed ({r['cut_short']} of them answers cut "
        f"short, {r['failed_while_down']} while a replica was down), {r['wrong']} wrong answers, "
        f"{r['rejected_chunks']} chunks refused, {r['chunks_lost']} lost {extra}{said}"
    )


def clean(rows: list[dict[str, Any]]) -> bool:
    """Every fault injected; no wrong answer, no chunk lost that policy did not evict, and no failed request
    (an answer cut short included) that a replica being down does not explain."""
    return all(
        not r["fault_error"] and r["wrong"] == 0 and r["chunks_lost"] == 0 and r["failed_otherwise"] == 0
        for r in rows
    )


def table(rows: list[dict[str, Any]]) -> str:
    """The soak's table, as plain text (a benchmark's output and the docs' tables)."""
    head = (
        "fault", "requests", "failed", "of them cut short", "while down", "wrong", "refused chunks",
        "lost chunks", "recovered s", "note",
    )  # fmt: skip
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in rows:
        note = r["fault_error"] or ", ".join(f"{k} {r[k]}" for k in NOTES if k in r)
        cells = (
            r["fault"], r["requests"], r["failed"], r["cut_short"], r["failed_while_down"], r["wrong"],
            r["rejected_chunks"], r["chunks_lost"], r.get("recovered_s", "-"), note,
        )  # fmt: skip
        lines.append(" | ".join(str(c) for c in cells))
    return "\n".join(f"| {line} |" for line in lines)
