"""`kvtier bench --rig` end to end: the command starts its own two vLLM CPU replicas from values/cpu.yaml's
rendered container, measures cold, L0, cross-replica L2 and recompute, and writes the table's JSON and
plot. It is the first file of tests/engine (file order), before the session rig of conftest.py or
test_l2_tiers.py's starts, so no more than two engines share the cores. Timings are not asserted; hits
and outputs are."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig.errors import RigError


def test_bench_rig_prints_and_writes_the_tier_table(tmp_path: Path, need) -> None:
    try:
        engine_rig.engine_python()
    except RigError as error:
        need(False, f"engine rig unavailable: {error}")
    out = tmp_path / "results"
    cmd = [
        sys.executable,
        "-m",
        "kvtier.cli",
        "bench",
        "--rig",
        "--repeats",
        "1",
        "--words",
        "600",
        "--out",
        str(out),
    ]
    proc = subprocess.run([*cmd, "--output", "json"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    printed = json.loads(proc.stdout)
    assert printed == json.loads((out / "tiers.json").read_text())
    steps = [row["step"] for row in printed["table"]]
    assert steps[:3] == ["cold (replica 0)", "L0 hit (replica 0 again)", "L2 hit (replica 1, first time)"]
    whole = printed["prompt_tokens"] // printed["chunk_size"] * printed["chunk_size"]
    assert printed["table"][0]["hit_tokens"] == 0 and printed["table"][2]["hit_tokens"] == whole > 0
    assert printed["identical_outputs"] is True
    assert (out / "tiers.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
