"""vllm-scheduler-budget against vLLM's own SchedulerConfig (the pinned vLLM in the engine venv, through
tests/harness/engine/scheduler_probe.py): on generated settings, with the budget and sequence count given
and with the budget left to vLLM's batch defaults on each instance type's GPU (and on CPU), the rule refuses
exactly what vLLM refuses."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import engine as engine_probes
from kvtier.plan.facts import INSTANCE_TYPES
from kvtier.validate import catalogue
from kvtier.validate.inputs import loader
from kvtier.validate.inputs.origins import Origins
from kvtier.validate.rules import ValuesContext

PROBE = Path(engine_probes.__file__).with_name("scheduler_probe.py")
GOOD = loader.load(Path(__file__).parents[1] / "fixtures" / "values" / "good-minimal.yaml").data
# one instance type per GPU model, so that each memory step of vLLM's defaults is drawn about as often
ONE_PER_GPU = sorted({gpu: name for name, (gpu, *_) in sorted(INSTANCE_TYPES.items())}.values())
SIZES = [1, 16, 255, 256, 512, 1024, 2048, 4096, 8191, 8192, 16384]


def cases(count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        out.append(
            {
                "max_num_batched_tokens": rng.choice(SIZES),
                "max_num_seqs": rng.choice(SIZES),
                "enable_chunked_prefill": rng.choice([True, False]),
                "max_num_active_seqs": rng.choice([None, *SIZES]),
                "long_prefill_token_threshold": rng.choice([None, 0, *SIZES]),
                "max_model_len": rng.choice([512, 4096, 8192, 16384]),
            }
        )
    return out


def argv(case: dict[str, Any]) -> list[str]:
    args = [
        f"--max-num-seqs={case['max_num_seqs']}",
        "--enable-chunked-prefill" if case["enable_chunked_prefill"] else "--no-enable-chunked-prefill",
    ]
    if case.get("performance_mode"):
        args.append(f"--performance-mode={case['performance_mode']}")
    for flag in ("max_num_batched_tokens", "max_num_active_seqs", "long_prefill_token_threshold"):
        if case.get(flag) is not None:
            args.append(f"--{flag.replace('_', '-')}={case[flag]}")
    return args


def defaulted_cases(count: int, seed: int) -> list[dict[str, Any]]:
    """--max-num-seqs set, the budget left to vLLM's defaults, on a drawn instance type or on CPU."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        instance = rng.choice([*ONE_PER_GPU, "cpu"])
        gpu, _count, memory, _host = INSTANCE_TYPES.get(instance, ("", 0, 0.0, 0.0))
        case: dict[str, Any] = {
            "max_num_batched_tokens": None,
            "max_num_seqs": rng.choice([*SIZES, 3000, 5000, 9000, 20000]),
            "enable_chunked_prefill": rng.choice([True, False]),
            "max_model_len": rng.choice([512, 4096, 8192, 16384]),
            "world_size": rng.choice([1, 2]),
            "performance_mode": rng.choice(["balanced", "throughput"]),
            "instance": instance,
        }
        case.update({"cpu": True} if instance == "cpu" else {"gpu": {"memory_gib": memory, "name": gpu}})
        out.append(case)
    return out


def refused_by_rule(case: dict[str, Any]) -> bool:
    values = copy.deepcopy(GOOD)
    values["models"][0].update(maxModelLen=case["max_model_len"], extraArgs=argv(case))
    if "world_size" in case:
        values["models"][0]["gpusPerReplica"] = case["world_size"]
        if case["instance"] == "cpu":
            values["engine"] = {"accelerator": "cpu"}
        else:
            values["models"][0]["instanceType"] = case["instance"]
    loaded = loader.load_text(yaml.safe_dump(values, sort_keys=False), Path("env.yaml"))
    ctx = ValuesContext(loaded.data, loaded, origins=Origins([loaded]))
    found = catalogue.run_values(ctx, only=["vllm-scheduler-budget"])
    return any(f.severity == "error" for f in found)


@pytest.mark.parametrize("draw", ["given", "defaulted"])
def test_the_rule_refuses_what_vllm_refuses(work: Path, run_probe, draw: str) -> None:
    generated = cases(400, 20261206) if draw == "given" else defaulted_cases(300, 20261207)
    request = work / f"scheduler-{draw}.json"
    request.write_text(json.dumps({"cases": generated}))
    proc = run_probe(PROBE, request)
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdicts = json.loads(proc.stdout.strip().splitlines()[-1])["cases"]
    assert sum(not v["ok"] for v in verdicts) > 30 and sum(v["ok"] for v in verdicts) > 30  # both sides drawn
    wrong = [
        (case, v["error"])
        for case, v in zip(generated, verdicts, strict=True)
        if refused_by_rule(case) == v["ok"]
    ]
    assert not wrong, wrong[:5]
