"""The soak's verdicts (kvtier.load.soak) on hand-made points: which failures a dead engine explains, which
answers are wrong, and when a run is clean. The rig runs are tests/engine/test_soak_smoke.py."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Iterator
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


def test_an_answer_cut_short_while_its_replica_died_is_told_apart_from_a_wrong_one() -> None:
    down = soak.Injection(down=[(100.0, 140.0)])
    p = point(
        record((1,), "alp", sent=95.0),  # in flight when the engine died: its stream ended there
        record((2,), "be", sent=60.0),  # the same prefix long before the kill: wrong
        record((3,), "gammaX", sent=120.0),  # longer than its reference while down: wrong
        record((4,), "dx", sent=120.0),  # not a prefix while down: wrong
    )
    r = soak.row("kill-engine", p, ANSWERS, down, rejected=0)
    assert (r["cut_short_while_down"], r["wrong"]) == (1, 3)
    assert [e["text"] for e in r["wrong_examples"]] == ["be", "gammaX", "dx"]
    assert "1 answers cut short" in soak.line(r) and not soak.clean([r])
    only_cut = soak.row("kill-engine", point(record((1,), "a", sent=101.0)), ANSWERS, down, rejected=0)
    assert only_cut["wrong"] == 0 and soak.clean([only_cut])


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

    def kill_engine(self) -> None:
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
    """A soak.Subject that only notes when a replica was killed."""

    def __init__(self) -> None:
        self.killed_at: list[float] = []

    def clock_ns(self) -> int:
        return 0

    def kill_engine(self) -> None:
        self.killed_at.append(time.monotonic())


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
