"""The soak: the load benchmark's mix under faults, every answer held to its reference (docs/reliability.md).

References: each prompt answered once, one at a time and greedy, by a replica with no cache at all (tier
set `none`: prefix caching, L1 and L2 off), through vLLM's own `vllm bench serve`, as the load runs are.
Then, on the tiered rig (replicas from values/cpu.yaml's rendered container on one L2, router replicas in
front), each fault gets fresh prompts of the mix and a fault thread that starts `at_s` into the point:

- `none`: nothing (the baseline: wrong answers here would mean the oracle is unsound);
- `kill-engine`: SIGKILL one replica and restart it as the kubelet restarts a container (same address);
- `change-chunks`, `truncate-chunks`, `delete-chunks`: every `interval_s` a random chunk file of the
  point's own prompts is changed in place (64 bytes inverted, size kept), cut to half, or removed
  (eviction racing its reader);
- `evict`: the chart's eviction script at aggressive watermarks (down to nothing, no minimum age) in a loop;
- `l2-gone`: the model's L2 namespace moved away for `hold_s`, then back.

Per fault: requests, failed (and, for a killed engine, how many were sent while it was down), answers that
differ from their reference, chunks the plugin refused (its engine log lines), time to recover.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig import tiers as tier_rig
from kvtier.engine_rig.errors import RigError
from kvtier.load import driver, routing, workload
from kvtier.load.experiment import RIG_L0_BLOCKS, FreshPrompts
from kvtier.podscripts import l2_evict

# A request unanswered this long counts as failed: a soak request takes seconds on the rig, and one in
# flight on a killed engine was seen never to be answered through the router.
REQUEST_TIMEOUT_S = 60.0
REJECTED = "failed verification"  # the plugin's log words for a refused chunk (podscripts/l2_connector.py)
FAULTS = ("none", "kill-engine", "change-chunks", "truncate-chunks", "delete-chunks", "evict", "l2-gone")
NOTES = ("files_damaged", "eviction_runs", "away_s")  # a fault's own figures, shown beside its row


@dataclass
class Injection:
    """What a fault thread did: its own figures, and when the engines were down (for failures)."""

    figures: dict[str, Any] = field(default_factory=dict)
    down: list[tuple[float, float]] = field(default_factory=list)  # (from, to) in time.monotonic()
    error: str = ""


@dataclass(frozen=True)
class Timing:
    at_s: float = 3.0  # when a fault starts, after the point's first request
    interval_s: float = 1.0  # between chunk damages and eviction runs
    hold_s: float = 8.0  # how long the L2 namespace stays away


def _every(stop: threading.Event, interval_s: float, action: Callable[[], None]) -> None:
    while not stop.wait(interval_s):
        action()


def _damage(
    kind: str, rig: tier_rig.TieredRig, rng: random.Random, done: dict[str, int], since_ns: int
) -> None:
    """Damage one chunk file written during this point (its prompts' chunks, which its later requests
    read; an earlier point's chunks are never asked for again)."""
    files = sorted(p for p in rig.chunk_files() if _written_since(p, since_ns))  # sorted: the seed decides
    if not files:
        return
    path = rng.choice(files)
    try:
        if kind == "delete-chunks":
            path.unlink()
        else:
            data = bytearray(path.read_bytes())
            if kind == "truncate-chunks":
                data = data[: len(data) // 2]
            else:
                middle = len(data) // 2
                data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
            path.write_bytes(bytes(data))
    except FileNotFoundError:  # evicted or rejected meanwhile
        return
    done["files_damaged"] = done.get("files_damaged", 0) + 1


def _written_since(path: Path, since_ns: int) -> bool:
    try:
        return path.stat().st_mtime_ns >= since_ns
    except FileNotFoundError:
        return False


def _evict(rig: tier_rig.TieredRig, done: dict[str, int]) -> None:
    """One run of the eviction job's script as the CronJob runs it (its own process), evicting all it may."""
    assert rig.l2_dir is not None
    script = Path(l2_evict.__file__)
    argv = [sys.executable, str(script), "--dir", str(rig.l2_dir.parent), "--high", "0", "--low", "0"]
    proc = subprocess.run([*argv, "--min-age", "0"], capture_output=True, text=True, timeout=60)
    done["eviction_runs"] = done.get("eviction_runs", 0) + 1
    done["eviction_failures"] = done.get("eviction_failures", 0) + (proc.returncode != 0)


def inject(name: str, rig: tier_rig.TieredRig, stop: threading.Event, timing: Timing, seed: int) -> Injection:
    """Run fault `name` against `rig` until `stop` is set (the point is over); never raises."""
    result = Injection()
    rng = random.Random(seed)
    point_started = time.time_ns()
    try:
        if stop.wait(timing.at_s) or name == "none":
            return result
        if name == "kill-engine":
            down = time.monotonic()
            rig.kill_and_restart(1)
            result.down.append((down, time.monotonic()))
            result.figures["recovered_s"] = round(time.monotonic() - down, 1)
        elif name in ("change-chunks", "truncate-chunks", "delete-chunks"):
            _every(stop, timing.interval_s, lambda: _damage(name, rig, rng, result.figures, point_started))
        elif name == "evict":
            _every(stop, timing.interval_s, lambda: _evict(rig, result.figures))
        elif name == "l2-gone":
            assert rig.l2_dir is not None
            away = rig.l2_dir.with_name(rig.l2_dir.name + ".away")
            rig.l2_dir.rename(away)
            gone = time.monotonic()
            stop.wait(timing.hold_s)  # or less, when the point ends first
            if rig.l2_dir.exists():  # an engine made it again meanwhile: keep both sets of files
                for path in away.iterdir():
                    path.rename(rig.l2_dir / path.name)
                away.rmdir()
            else:
                away.rename(rig.l2_dir)
            result.figures["away_s"] = round(time.monotonic() - gone, 1)
        else:
            raise RigError(f"unknown fault {name!r}; expected one of {', '.join(FAULTS)}")
    except Exception as error:  # the row says the fault itself broke; the run goes on
        result.error = f"{type(error).__name__}: {error}"
    return result


class FaultThread:
    """Fault `name` on the soak's fault thread from start(); finish() stops it and waits for it (a killed
    engine is back when it returns), then `injection` holds what it did.

    Every fault runs on one thread that outlives the rig (`runner`): a replica restarted from a thread
    dies with it, since the rig's processes get SIGTERM when the thread that started them exits (Linux's
    parent-death signal follows the thread; engine_rig/processes.py)."""

    def __init__(
        self, name: str, rig: tier_rig.TieredRig, timing: Timing, seed: int, runner: ThreadPoolExecutor
    ) -> None:
        self.stop = threading.Event()
        self.injection = Injection()
        self._args = (name, rig, self.stop, timing, seed)
        self._runner = runner
        self._future: Future[Injection] | None = None

    def start(self) -> None:
        self._future = self._runner.submit(inject, *self._args)

    def finish(self) -> None:
        self.stop.set()
        if self._future is not None:
            self.injection = self._future.result()


@contextmanager
def fault_thread(
    name: str, rig: tier_rig.TieredRig, timing: Timing, seed: int, runner: ThreadPoolExecutor
) -> Iterator[FaultThread]:
    fault = FaultThread(name, rig, timing, seed, runner)
    fault.start()
    try:
        yield fault
    finally:
        fault.finish()


def references(
    requests: list[workload.Request], mix: workload.Mix, work_dir: Path, log: Callable[[str], None]
) -> dict[tuple[int, ...], str]:
    """Each prompt's greedy answer from a replica with no cache, one request at a time."""
    with tier_rig.TieredRig(work_dir, replicas=1, tiers=tier_rig.NO_CACHE, log=log) as reference:
        url = reference.started[0].url
        tokenizer = str(work_dir / "models" / engine_rig.MODEL_NAME)
        target = driver.Target([url], engine_rig.MODEL_NAME, tokenizer, [url], offline=True)
        # All at once on the trace's clock, one in flight at a time: a batch of one, in a minute or so.
        point = driver.run_point(
            engine_rig.engine_python(), target, requests, mix, 1000.0, work_dir / "run", max_concurrency=1
        )
    failed = [r for r in point.records if not r["ok"]]
    if failed:
        raise RigError(f"the reference replica failed {len(failed)} request(s): {failed[0]['error']}")
    return {tuple(r["hash_ids"]): r["text"] for r in point.records}


def _rejected(rig: tier_rig.TieredRig) -> int:
    logs = (rig.work_dir / "logs").glob("*.log")
    return sum(path.read_text(errors="replace").count(REJECTED) for path in logs)


# A request sent this long before an engine went down may still have been in flight on it.
IN_FLIGHT_S = 30.0


def row(
    fault: str, point: driver.Point, answers: dict[tuple[int, ...], str], injection: Injection, rejected: int
) -> dict[str, Any]:
    """One table row: what failed, when, and which answers differ from their reference."""

    def while_down(record: dict[str, Any]) -> bool:
        sent = record.get("sent_s")
        return sent is not None and any(a - IN_FLIGHT_S <= sent <= b for a, b in injection.down)

    failed = [r for r in point.records if not r["ok"]]
    down = [r for r in failed if while_down(r)]
    wrong = [r for r in point.records if r["ok"] and r["text"] != answers[tuple(r["hash_ids"])]]
    return {
        "fault": fault,
        "requests": len(point.records),
        "failed": len(failed),
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
        "errors": sorted({r["error"][:200] for r in failed})[:3],
        "rejected_chunks": rejected,
        "connector_hit_tokens": point.tiers.get("external_hit_tokens"),
        "fault_error": injection.error,
        **injection.figures,
    }


def run(
    faults: list[str], mix: workload.Mix, qps: float, work_dir: Path, log: Callable[[str], None],
    replicas: int = 3, router_replicas: int = 2, timing: Timing = Timing(), integrity: bool = True,
) -> list[dict[str, Any]]:  # fmt: skip
    """One row per fault, in order, on one rig (a fault's damage is the next fault's starting L2);
    `integrity` False turns the chart's sealed chunk files off, to show what the check is there for."""
    unknown = [f for f in faults if f not in FAULTS]
    if unknown:
        raise RigError(f"unknown fault {unknown[0]!r}; expected one of {', '.join(FAULTS)}")
    prompts = FreshPrompts(mix)
    plan = [(fault, *prompts.take()) for fault in faults]
    everything = [request for _, _, requests in plan for request in requests]
    log(f"references: {len(everything)} prompts, one at a time on a replica without cache")
    answers = references(everything, mix, work_dir / "reference", log)
    rows = []
    flags, _source = routing.flags("roundrobin")
    engine_args = ("--num-gpu-blocks-override", str(RIG_L0_BLOCKS))
    rig_dir = work_dir / "rig"
    with (
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="soak-faults") as runner,  # outlives the rig
        tier_rig.TieredRig(
            rig_dir, replicas=replicas, engine_args=engine_args, integrity=integrity, log=log
        ) as rig,
    ):
        engines = [p.url for p in rig.started]
        tokenizer = str(rig_dir / "models" / engine_rig.MODEL_NAME)
        with routing.routers("roundrobin", flags, engines, router_replicas, rig_dir) as urls:
            target = driver.Target(urls, engine_rig.MODEL_NAME, tokenizer, engines, offline=True)
            for index, (fault, point_mix, requests) in enumerate(plan):
                before = _rejected(rig)
                with fault_thread(fault, rig, timing, mix.seed + index, runner) as thread:
                    point = driver.run_point(
                        engine_rig.engine_python(), target, requests, point_mix, qps, rig_dir / fault,
                        settle=thread.finish, request_timeout_s=REQUEST_TIMEOUT_S,
                    )  # fmt: skip
                rows.append(row(fault, point, answers, thread.injection, _rejected(rig) - before))
                log(line(rows[-1]))
    return rows


def line(r: dict[str, Any]) -> str:
    extra = {k: v for k, v in r.items() if k in ("recovered_s", *NOTES)}
    said = f" ({r['fault_error']})" if r["fault_error"] else ""
    return (
        f"{r['fault']}: {r['requests']} requests, {r['failed']} failed ({r['failed_while_down']} while an "
        f"engine was down), {r['wrong']} wrong answers, {r['rejected_chunks']} chunks refused {extra}{said}"
    )


def clean(rows: list[dict[str, Any]]) -> bool:
    """No wrong answer, and no failed request that an engine being down does not explain."""
    return all(r["wrong"] == 0 and r["failed_otherwise"] == 0 for r in rows)


def table(rows: list[dict[str, Any]]) -> str:
    """The soak's table, as plain text (a benchmark's output and the docs' tables)."""
    head = ("fault", "requests", "failed", "while down", "wrong", "refused chunks", "recovered s", "note")
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in rows:
        note = r["fault_error"] or ", ".join(f"{k} {r[k]}" for k in NOTES if k in r)
        cells = (
            r["fault"], r["requests"], r["failed"], r["failed_while_down"], r["wrong"], r["rejected_chunks"],
            r.get("recovered_s", "-"), note,
        )  # fmt: skip
        lines.append(" | ".join(str(c) for c in cells))
    return "\n".join(f"| {line} |" for line in lines)
