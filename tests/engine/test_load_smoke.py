"""The load benchmark's short smoke: behaviour under load, never a timing.

Three replicas of values/cpu.yaml's rendered container with every tier (L0 capped as the benchmark caps
it), the chart's two round-robin router replicas, and vLLM's `vllm bench serve` replaying a short mix
open-loop, one client per router: every request must be answered, and each tier must supply hits (L0 from
the engines' prefix-cache counter, L1+L2 from the KV-connector counter, L2 files on the shared volume).
The trace itself is checked against vLLM's own timed_trace reader.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import engine as engine_probes
from kvtier.engine_rig import rig as engine_rig
from kvtier.engine_rig import tiers
from kvtier.engine_rig.errors import RigError
from kvtier.load import driver, experiment, routing, workload

PROBE = Path(engine_probes.__file__).with_name("timed_trace_probe.py")
MIX = workload.Mix(
    requests=36, system_prompts=3, mean_turns=2, document_share=0.1, seed=5, max_prompt_tokens=3072
)


def _vllm_reads(trace: Path, tokenizer: Path, hash_seed: str) -> dict:
    env = {**os.environ, **driver.CLIENT_ENV, **driver.OFFLINE_ENV, "PYTHONHASHSEED": hash_seed}
    python = engine_rig.engine_python()
    proc = subprocess.run(
        [str(python), str(PROBE), str(trace), str(tokenizer), str(MIX.block_tokens)],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_vllm_turns_the_trace_into_prompts_that_share_exactly_the_shared_blocks(work: Path) -> None:
    tokenizer = engine_rig.generate_model(work / "model")
    requests = workload.generate(MIX)
    trace = workload.write_trace(requests, work / "trace.jsonl")
    read = _vllm_reads(trace, tokenizer, driver.CLIENT_ENV["PYTHONHASHSEED"])
    prompts, ids = read["prompts"], [r.hash_ids for r in requests]
    assert [len(p) for p in prompts] == [r.input_length for r in requests]
    assert read["timestamps"] == pytest.approx(
        [r.timestamp - requests[0].timestamp for r in requests], abs=1e-5
    )
    block = MIX.block_tokens
    for (one, one_ids), (other, other_ids) in itertools.combinations(zip(prompts, ids, strict=True), 2):
        shorter = min(len(one_ids), len(other_ids))
        common = next((i for i in range(shorter) if one_ids[i] != other_ids[i]), shorter)
        assert one[: common * block] == other[: common * block]
        if common < shorter:  # the first block they do not share differs in its tokens too
            assert one[common * block : (common + 1) * block] != other[common * block : (common + 1) * block]
    # Why the clients pin PYTHONHASHSEED: vLLM seeds each block from Python's string hash.
    assert _vllm_reads(trace, tokenizer, "0")["prompts"] == prompts
    assert _vllm_reads(trace, tokenizer, "1")["prompts"] != prompts


def test_under_load_every_request_is_answered_and_every_tier_supplies_hits(
    tmp_path_factory: pytest.TempPathFactory, need
) -> None:
    """Through `kvtier load` itself, as a user runs it against a release's router and engine URLs."""
    # A short folder: vLLM's ZMQ socket paths under it must fit sockaddr_un's 107 characters.
    tmp_path = tmp_path_factory.mktemp("load")
    try:
        engine_rig.engine_python()  # where `vllm bench serve` runs
    except RigError as error:
        need(False, f"engine rig unavailable: {error}")
    blocks = ("--num-gpu-blocks-override", str(experiment.RIG_L0_BLOCKS))
    with tiers.TieredRig(tmp_path, replicas=3, engine_args=blocks) as rig:
        engines = [p.url for p in rig.started]
        flags, _ = routing.flags("roundrobin")
        with routing.routers("roundrobin", flags, engines, 2, tmp_path) as urls:
            argv = [sys.executable, "-m", "kvtier.cli", "load", "--model", engine_rig.MODEL_NAME]
            argv += ["--tokenizer", str(tmp_path / "models" / engine_rig.MODEL_NAME), "--qps", "3"]
            argv += [f"--router-url={url}" for url in urls] + [f"--replica-url={url}" for url in engines]
            argv += ["--requests", str(MIX.requests), "--system-prompts", str(MIX.system_prompts)]
            argv += ["--mean-turns", str(MIX.mean_turns), "--seed", str(MIX.seed), "--max-prompt-tokens"]
            argv += [str(MIX.max_prompt_tokens), "--out", str(tmp_path / "load"), "-o", "json"]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
        chunks = rig.chunk_files()
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = json.loads(done.stdout)["rows"]
    assert (row["completed"], row["failed"]) == (MIX.requests, 0), row
    assert sorted(row["by_router"]) == ["0", "1"], "both router replicas carried requests"
    assert all(n > 0 for n in row["by_engine"]) and sum(row["by_engine"]) == MIX.requests
    assert row["l0_hit_tokens"] > 0, "shared system prompts on the same replica hit L0"
    assert row["connector_hit_tokens"] > 0, "round robin sends repeats to other replicas: L2 must supply them"
    assert chunks, "the engines wrote chunks to the shared L2"
    assert (tmp_path / "load" / "load.png").stat().st_size > 0
