"""The soak's verdicts (kvtier.load.soak) on hand-made points: which failures a dead engine explains, which
answers are wrong, and when a run is clean. The rig runs are tests/engine/test_soak_smoke.py."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from kvtier.load import driver, soak


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
    r = soak.row("kill-engine", p, ANSWERS, down, rejected=0)
    assert (r["failed"], r["failed_while_down"], r["failed_otherwise"]) == (4, 2, 2)
    assert r["recovered_s"] == 40.0 and not soak.clean([r])


def test_an_answer_that_differs_from_its_reference_is_wrong_and_a_failure_is_not() -> None:
    p = point(record((1,), "alpha", 1.0), record((2,), "BETA", 2.0), record((3,), "", 3.0, ok=False))
    r = soak.row("change-chunks", p, ANSWERS, soak.Injection(figures={"files_damaged": 3}), rejected=2)
    assert r["wrong"] == 1 and r["wrong_examples"][0]["text"] == "BETA"
    assert (r["failed"], r["failed_otherwise"]) == (1, 1)  # no engine was down: nothing explains it
    assert r["rejected_chunks"] == 2 and r["files_damaged"] == 3
    assert not soak.clean([r])


def test_a_run_with_right_answers_and_only_explained_failures_is_clean() -> None:
    down = soak.Injection(down=[(10.0, 20.0)])
    rows = [
        soak.row("none", point(record((1,), "alpha", 1.0)), ANSWERS, soak.Injection(), 0),
        soak.row("kill-engine", point(record((2,), "", 15.0, ok=False)), ANSWERS, down, 0),
    ]
    assert soak.clean(rows)
    table = soak.table(rows)
    assert table.splitlines()[0].startswith("| fault | requests | failed |") and "kill-engine" in table


def test_a_fault_that_breaks_is_reported_not_raised(tmp_path: Path) -> None:
    class Rig:  # no replica 1 to kill
        work_dir = tmp_path

        def kill_and_restart(self, index: int) -> None:
            raise IndexError(f"no replica {index}")

    stop = threading.Event()
    result = soak.inject("kill-engine", Rig(), stop, soak.Timing(at_s=0.0), seed=0)  # type: ignore[arg-type]
    assert result.error == "IndexError: no replica 1" and result.down == []


def test_unknown_faults_are_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(soak.RigError, match="unknown fault 'meteor'"):
        soak.run(["none", "meteor"], soak.workload.Mix(requests=2), 1.0, tmp_path, print)
