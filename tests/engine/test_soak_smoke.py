"""The soak's short version: under load and faults, no wrong answer, no lost chunk and no failure a killed
replica does not explain (kvtier.load.soak, docs/reliability.md).

Each prompt's reference is its greedy answer from a replica without any cache; two replicas of
values/cpu.yaml's rendered container (integrity on, the chart's default) then serve the mix behind two
round-robin routers while chunk files are changed in place under them, while one replica and then one
router is killed and restarted, and while the L2 volume (a tmpfs of its own: root) is full: confirmed full
(a write refused with ENOSPC) before the point's first request, however long filling takes here. An answer
cut short (a strict prefix of its reference) is a failed request, which only a killed replica explains.
benchmarks/soak_bench.py runs every fault, longer; tests/node/test_umbrella_cpu.py runs the soak against
a release.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig.errors import RigError
from kvtier.load import experiment, soak, soak_rig, workload

MIX = workload.Mix(
    requests=14, system_prompts=2, mean_turns=2, document_share=0.1, seed=7,
    max_prompt_tokens=experiment.RIG_MAX_PROMPT,
)  # fmt: skip


def test_no_wrong_answer_and_no_unexplained_failure_under_faults(
    tmp_path_factory: pytest.TempPathFactory, need
) -> None:
    # A short folder: vLLM's ZMQ socket paths under it must fit sockaddr_un's 107 characters.
    work = tmp_path_factory.mktemp("soak")
    try:
        engine_rig.engine_python()
    except RigError as error:
        need(False, f"engine rig unavailable: {error}")
    need(os.geteuid() == 0, "l2-full mounts a tmpfs for the L2 (root only)")
    timing = soak.Timing(at_s=1.0, interval_s=0.5, hold_s=4.0)
    faults = ["change-chunks", "kill-engine", "kill-router", "l2-full"]
    rows = soak_rig.run(faults, MIX, 3.0, Path(work), print, replicas=2, timing=timing)
    print(soak.table(rows))
    print(f"[soak-smoke] {json.dumps(rows)}")
    changed, killed, router, full = rows
    assert changed["files_damaged"] > 0, changed
    assert killed["recovered_s"] > 0 and router["recovered_s"] > 0, (killed, router)
    assert full["full_s"] > 0, full
    for row in rows:
        assert not row["fault_error"], row
        assert row["requests"] == MIX.requests, row
        assert row["wrong"] == 0, f"answers differ from their references under {row['fault']}: {row}"
        # failed counts answers cut short too (cut_short): a client that took one took a wrong answer
        assert row["failed_otherwise"] == 0, f"failures no dead replica explains under {row['fault']}: {row}"
        assert row["chunks_lost"] == 0, f"chunks lost under {row['fault']}: {row}"
    assert soak.clean(rows)
