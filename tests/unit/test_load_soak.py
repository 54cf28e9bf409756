"""The soak's verdicts (kvtier.load.soak) on hand-made points: which failures a dead engine explains, which
answers are wrong, and when a run is clean. The rig runs are tests/engine/test_soak_smoke.py."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from kvtier import cli, exitcodes
from kvtier.load import driver, soak, soak_rig


def record(ids: tuple[int, ...], text: str, sent: float | None, ok: bool = True) -> dict[str, Any]:
    return {
        "hash_ids": list(ids),
        "text": text if ok else "",
        "sent_s": sent,
        "ok": ok,
        "error": "" if ok else "502",
    }


def point(*records: dict[str, Any]) -> driver.Point:
    return driver.Point(3.0, list(records), 10.0, {"external_hit_tokens": 512.0}, [len(records)])


ANSWERS = {(1,): "alpha", (2,): "beta", (3,): "gamma", (4,): "delta"}


def test_failures_while_an_engine_was_down_are_told_apart_from_the_rest() -> None:
    down = soak.Injection(down=[(100.0, 140.0)], figures={"recovered_s": 40.0})
    p = point(
        record((1,), "alpha", sent=95.0, ok=False),  # in flight when the engine died
        record((2,), "beta", sent=120.0, ok=False),  # sent while it was down
        record((3,), "gamma", sent=141.5, ok=False),  # after it was back: unexplained
        record((4,), "delta", sent=60.0, ok=False),  # long before (more than IN_FLIGHT_S): unexplained
    )
    p.records[0]["error"] = "Traceback (most recent call last):\n  File x\nClientConnectorError: refused\n"
    r = soak.row("kill-engine", p, ANSWERS, down, rejected=0)
    assert (r["failed"], r["failed_while_down"], r["failed_otherwise"]) == (4, 2, 2)
    assert r["errors"] == ["502", "ClientConnectorError: refused"]  # a traceback's last line
    assert r["recovered_s"] == 40.0 and not soak.clean([r])


def test_an_answer_that_differs_from_its_reference_is_wrong_and_a_failure_is_not() -> None:
    p = point(record((1,), "alpha", 1.0), record((2,), "BETA", 2.0), record((3,), "", 3.0, ok=False))
    r = soak.row("change-chunks", p, ANSWERS, soak.Injection(figures={"files_damaged": 3}), rejected=2)
    assert r["wrong"] == 1 and r["wrong_examples"][0]["text"] == "BETA"
    assert (r["failed"], r["failed_otherwise"]) == (1, 1)  # no engine was down: nothing explains it
    assert r["rejected_chunks"] == 2 and r["files_damaged"] == 3
    assert not soak.clean([r])


def test_an_answer_cut_short_is_a_failed_request_bounded_as_failures_are() -> None:
    down = soak.Injection(down=[(100.0, 140.0)])
    p = point(
        record((1,), "alp", sent=95.0),  # in flight when the engine died: its stream ended there
        record((2,), "be", sent=60.0),  # the same cut long before the kill: nothing explains it
        record((3,), "gammaX", sent=120.0),  # longer than its reference while down: wrong
        record((4,), "dx", sent=120.0),  # not a prefix while down: wrong
    )
    r = soak.row("kill-engine", p, ANSWERS, down, rejected=0)
    assert (r["failed"], r["cut_short"], r["failed_while_down"], r["failed_otherwise"]) == (2, 2, 1, 1)
    assert r["wrong"] == 2 and [e["text"] for e in r["wrong_examples"]] == ["gammaX", "dx"]
    assert r["cut_short_examples"][0] == {"hash_ids": [1], "chars": 3, "reference_chars": 5}
    assert r["errors"] == [soak.CUT_SHORT_ERROR]  # the client saw no error: the row says what it was
    assert "2 failed (2 of them answers cut short" in soak.line(r) and not soak.clean([r])
    # Cut short while its replica was down: a failure the kill explains, not a clean success.
    explained = soak.row("kill-engine", point(record((1,), "a", sent=101.0)), ANSWERS, down, rejected=0)
    assert (explained["failed"], explained["cut_short"], explained["failed_while_down"]) == (1, 1, 1)
    assert explained["wrong"] == 0 and soak.clean([explained])
    # With no replica down a cut-short answer is an unexplained failure: the soak fails.
    quiet = soak.row("none", point(record((2,), "bet", sent=101.0)), ANSWERS, soak.Injection(), rejected=0)
    assert (quiet["failed"], quiet["failed_otherwise"], quiet["wrong"]) == (1, 1, 0) and not soak.clean(
        [quiet]
    )
    table = soak.table([r])
    assert "| failed | of them cut short | while down |" in table and "| 2 | 2 | 1 |" in table


def test_a_run_with_right_answers_and_only_explained_failures_is_clean() -> None:
    down = soak.Injection(down=[(10.0, 20.0)])
    rows = [
        soak.row("none", point(record((1,), "alpha", 1.0)), ANSWERS, soak.Injection(), 0),
        soak.row("kill-engine", point(record((2,), "", 15.0, ok=False)), ANSWERS, down, 0),
    ]
    assert soak.clean(rows)
    table = soak.table(rows)
    assert table.splitlines()[0].startswith("| fault | requests | failed |") and "kill-engine" in table


class Breaking:
    """A soak.Subject whose every action fails, as a fault that cannot be injected does."""

    def clock_ns(self) -> int:
        return 0

    def kill_engine(self, killed: Callable[[], None]) -> None:
        raise IndexError("no replica 1")

    @contextlib.contextmanager
    def volume_fault(self, fault: str) -> Iterator[None]:
        raise soak.RigError(f"{fault}: the L2 is not a volume of its own")
        yield


def test_a_fault_that_breaks_is_reported_not_raised() -> None:
    stop = threading.Event()
    result = soak.inject("kill-engine", Breaking(), stop, soak.Timing(at_s=0.0), seed=0)  # type: ignore[arg-type]
    assert result.error == "IndexError: no replica 1" and result.down == []
    broken = soak.row("kill-engine", point(record((1,), "alpha", 1.0)), ANSWERS, result, 0)
    assert not soak.clean([broken])  # a fault that was not injected proves nothing
    full = soak.inject("l2-full", Breaking(), stop, soak.Timing(at_s=0.0), seed=0)  # type: ignore[arg-type]
    assert (
        full.error == "RigError: l2-full: the L2 is not a volume of its own" and "full_s" not in full.figures
    )


class Listing:
    """A chunk directory the test changes between the ledger's samples."""

    def __init__(self, *names: str) -> None:
        self.names = set(names)

    def __call__(self) -> list[str]:
        return sorted(self.names)


def test_the_ledger_counts_a_chunk_gone_that_neither_the_fault_nor_an_eviction_run_removed() -> None:
    listing = Listing("a.data", "b.data", "c.data", "d.data")
    ledger = soak.ChunkLedger(listing, interval_s=3600)  # sampled by hand below
    with ledger:
        listing.names -= {"a.data", "b.data"}  # a: the fault deleted it; b: nobody did
        ledger.sample()
        evicting = (time.monotonic(), time.monotonic() + 0.001)
        listing.names -= {"c.data"}  # gone while an eviction ran
        ledger.sample()
        listing.names -= {"d.data"}
        ledger.sample()
        listing.names |= {"d.data"}  # d came back (healed) before the point ended
    injection = soak.Injection(removed={"a.data"}, evicting=[evicting])
    assert ledger.lost(injection) == ["b.data"]
    r = soak.row("evict", point(record((1,), "alpha", 1.0)), ANSWERS, injection, 0, ledger.lost(injection))
    assert r["chunks_lost"] == 1 and r["lost_examples"] == ["b.data"] and not soak.clean([r])
    assert soak.ChunkLedger(listing).lost(soak.Injection()) == []  # nothing sampled, nothing lost


def test_unknown_faults_are_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(soak.RigError, match="unknown fault 'meteor'"):
        soak_rig.run(["none", "meteor"], soak.workload.Mix(requests=2), 1.0, tmp_path, print)
    assert not list(tmp_path.iterdir())  # no reference replica was started


class Recording:
    """A soak.Subject that only notes when a replica was killed (confirmed at once)."""

    def __init__(self) -> None:
        self.killed_at: list[float] = []

    def clock_ns(self) -> int:
        return 0

    def kill_engine(self, killed: Callable[[], None]) -> None:
        self.killed_at.append(time.monotonic())
        killed()


def test_a_fault_counts_its_start_from_when_the_clients_send_not_from_when_they_start() -> None:
    subject, stop, sending = Recording(), threading.Event(), threading.Event()
    timing = soak.Timing(at_s=0.0)
    worker = threading.Thread(target=soak.inject, args=("kill-engine", subject, stop, timing, 0, (), sending))
    worker.start()
    time.sleep(0.5)  # vLLM's clients still importing
    assert subject.killed_at == []
    sent = time.monotonic()
    sending.set()
    worker.join(10)
    assert len(subject.killed_at) == 1 and subject.killed_at[0] >= sent
    # A point that ends before its clients ever send injects nothing.
    quiet = Recording()
    stop.set()
    result = soak.inject("kill-engine", quiet, stop, timing, 0, (), threading.Event())  # type: ignore[arg-type]
    assert quiet.killed_at == [] and result.down == []


def test_the_driver_waits_for_the_clients_first_request_or_their_exit(tmp_path: Path) -> None:
    log = tmp_path / "client-0.log"
    log.write_text("Starting initial single prompt test run...\nStarting main benchmark run...\n")
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        started = time.monotonic()
        driver._wait_sending([log], [sleeper])
        assert time.monotonic() - started < 5
    finally:
        sleeper.kill()
        sleeper.wait()
    log.write_text("ImportError: no vllm\n")  # a client that died before sending: no wait either
    driver._wait_sending([log], [sleeper])


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--rig", "--max-prompt-tokens", "0"], "--max-prompt-tokens (0)"),  # 0 is a value, not "unset"
        (["--rig", "--router-url", "http://127.0.0.1:1"], "leave out --router-url"),
        (["--replicas", "3"], "give --rig"),
        (["--backend", "vllm-native"], "give --rig"),  # it shapes the rig: a release has its own backend
        (["--rig", "--replicas", "1"], "--replicas must be 2-4"),
    ],
)
def test_soak_refuses_before_it_starts_anything_and_names_the_flag(
    argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["soak", "--out", str(tmp_path / "out"), *argv]) == exitcodes.USAGE
    assert said in capsys.readouterr().err


class LoadedMachine:
    """A soak.Subject on a loaded machine: each fault is in force only `late_s` after it is set off (the
    volume filled, the process reaped), and is noted when it is confirmed and when it ends."""

    def __init__(self, late_s: float, confirms: bool = True) -> None:
        self.late_s, self.confirms = late_s, confirms
        self.set_off: list[float] = []
        self.in_force: list[float] = []
        self.ended: list[float] = []

    def clock_ns(self) -> int:
        return 0

    def rejected(self) -> int:
        return 0

    def chunk_names(self) -> list[str]:
        return []

    def kill_engine(self, killed: Callable[[], None]) -> None:
        self.set_off.append(time.monotonic())
        time.sleep(self.late_s)
        if self.confirms:
            self.in_force.append(time.monotonic())
            killed()
        time.sleep(0.2)  # the replacement starts
        self.ended.append(time.monotonic())

    @contextlib.contextmanager
    def volume_fault(self, fault: str) -> Iterator[None]:
        self.set_off.append(time.monotonic())
        time.sleep(self.late_s)
        if not self.confirms:
            raise soak.RigError(f"{fault} not confirmed in force within 0 s: a write still fits")
        self.in_force.append(time.monotonic())
        try:
            yield
        finally:
            self.ended.append(time.monotonic())


def short_load(monkeypatch: pytest.MonkeyPatch, load_s: float) -> list[tuple[float, float]]:
    """driver.run_point as a point whose one request runs `load_s` once the clients send; the (start, end)
    of each load is noted."""
    loads: list[tuple[float, float]] = []

    def run_point(*_args: Any, settle: Callable[[], None], sending: Callable[[], None], **kw: Any) -> Any:
        kw.get("armed", lambda: None)()
        sending()
        start = time.monotonic()
        time.sleep(load_s)
        loads.append((start, time.monotonic()))
        settle()
        return point(record((1,), "alpha", start))

    monkeypatch.setattr(soak.driver, "run_point", run_point)
    monkeypatch.setattr(soak.engine_rig, "engine_python", lambda: Path("python"))
    return loads


def soak_points(subject: LoadedMachine, fault: str, timing: soak.Timing) -> dict[str, Any]:
    planned = [soak.Planned(fault, soak.workload.Mix(requests=1), [])]
    with ThreadPoolExecutor(max_workers=1) as runner:
        (row,) = soak.points(
            subject,
            None,
            planned,
            ANSWERS,
            1.0,
            Path("unused"),
            lambda _: None,
            runner,
            timing,
            3600,  # type: ignore[arg-type]
        )
    return row


def test_a_volume_fault_confirmed_late_holds_the_load_back_until_it_is_in_force(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loads = short_load(monkeypatch, load_s=0.4)
    subject = LoadedMachine(late_s=1.0)
    row = soak_points(subject, "l2-full", soak.Timing(at_s=0.0, hold_s=60.0))
    (start, end) = loads[0]
    assert subject.in_force[0] <= start and subject.ended[0] >= end  # in force for the whole load
    assert 0.3 <= row["full_s"] <= 1.0 and not row["fault_error"], row  # the window is the load's


def test_a_kill_counts_its_window_from_its_confirmation_not_from_when_it_was_set_off() -> None:
    subject, stop, sending = LoadedMachine(late_s=0.5), threading.Event(), threading.Event()
    sending.set()
    result = soak.inject("kill-engine", subject, stop, soak.Timing(at_s=0.0), 0, (), sending)  # type: ignore[arg-type]
    assert not result.error, result.error
    (since, until) = result.down[0]
    assert since >= subject.in_force[0] >= subject.set_off[0] + 0.5 and until >= subject.ended[0]
    assert result.figures["recovered_s"] < 0.5  # from the process's exit to the replacement, not the signal
    unseen = soak.inject(
        "kill-engine", LoadedMachine(0.0, confirms=False), stop, soak.Timing(at_s=0.0), 0, (), sending
    )  # type: ignore[arg-type]
    assert "never confirmed" in unseen.error and unseen.down == []


def test_a_fault_whose_point_ended_before_it_started_is_an_error_not_an_empty_window() -> None:
    subject, stop, sending = LoadedMachine(late_s=0.0), threading.Event(), threading.Event()
    sending.set()
    threading.Timer(0.2, stop.set).start()  # the clients were done 0.2 s in
    result = soak.inject("kill-engine", subject, stop, soak.Timing(at_s=5.0), 0, (), sending)  # type: ignore[arg-type]
    assert "were done before the fault's start" in result.error and subject.set_off == []
