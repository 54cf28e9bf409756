"""vllm-scheduler-budget (kvtier.validate.checks.scheduler_rules): the token budget, sequence count and
chunked-prefill settings vLLM's SchedulerConfig refuses at start-up, with the batch defaults it fills in by
GPU (tests/engine/test_scheduler_budget.py compares the explicit cases with vLLM's own class)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvtier.validate import catalogue
from kvtier.validate.inputs import loader
from kvtier.validate.inputs.origins import Origins
from kvtier.validate.rules import ValuesContext

pytestmark = pytest.mark.unit

RULE = "vllm-scheduler-budget"
FIXTURES = Path(__file__).parents[1] / "fixtures" / "values"
GOOD = loader.load(FIXTURES / "good-minimal.yaml").data  # maxModelLen 8192 on ml.g6e.4xlarge (L40S, 45 GiB)


def _run(args: list[str], values: dict[str, Any] | None = None, **model: Any) -> list[Any]:
    values = copy.deepcopy(GOOD if values is None else values)
    values["models"][0].update(model, extraArgs=args)
    loaded = loader.load_text(yaml.safe_dump(values, sort_keys=False), Path("env.yaml"))
    return catalogue.run_values(ValuesContext(loaded.data, loaded, origins=Origins([loaded])), only=[RULE])


def _severities(args: list[str], **model: Any) -> list[str]:
    return [f.severity for f in _run(args, **model)]


def test_the_rule_is_registered_with_its_source() -> None:
    r = catalogue.all_rules()[RULE]
    assert r.scope == "values" and "vllm/config/scheduler.py" in r.reason


@pytest.mark.parametrize(
    "args",
    [
        ["--max-num-batched-tokens", "4096", "--no-enable-chunked-prefill"],  # below maxModelLen 8192
        ["--max_num_batched_tokens=2k", "--no-enable-chunked-prefill"],  # vLLM's spellings, K suffix
        ["--max-num-batched-tokens", "256", "--max-num-seqs", "512"],
        ["--max-num-seqs", "512", "--max-num-active-seqs", "600"],
        ["--long-prefill-token-threshold", "9000"],
        ["--max-num-seqs", "4096"],  # the default budget on a 45 GiB L40S is 2048
        ["--max-num-seqs", "40000"],  # above every default
        ["--max-num-seqs", "9000", "--no-enable-chunked-prefill"],  # default raised to 8192 only
    ],
)
def test_refused(args: list[str]) -> None:
    assert _severities(args) == ["error"], args


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--max-num-batched-tokens", "4096"],  # chunked prefill on (the default) lifts the length floor
        ["--max-num-batched-tokens", "8192", "--no-enable-chunked-prefill"],
        ["--max-num-batched-tokens", "512", "--max-num-seqs", "512"],
        ["--max-num-seqs", "2048"],
        ["--max-num-seqs", "4096", "--performance-mode", "throughput"],  # default doubled to 4096
        ["--max-num-seqs", "512", "--max-num-active-seqs", "512"],
        ["--long-prefill-token-threshold", "8192"],
        ["--max-num-batched-tokens", "lots"],  # vllm-arg-invalid's to report
        ["--max-num-batched-tokens", "2048", "--enable-chunked-prefill=false"],  # argparse refuses: likewise
    ],
)
def test_accepted(args: list[str]) -> None:
    assert _severities(args) == [], args


def test_the_default_budget_follows_the_gpu() -> None:
    assert _severities(["--max-num-seqs", "4096"], instanceType="ml.p5.48xlarge") == []  # H100: 8192
    assert _severities(["--max-num-seqs", "4096"], instanceType="ml.p4de.24xlarge") == ["error"]  # A100: 2048
    assert _severities(["--max-num-seqs", "4096"], instanceType="ml.no-such.xlarge") == ["warning"]
    # with chunked prefill off vLLM raises the default to max_model_len
    assert _severities(["--max-num-seqs", "9000", "--no-enable-chunked-prefill"], maxModelLen=16384) == []


def test_active_seqs_over_the_default_max_num_seqs_follows_the_gpu() -> None:
    """vLLM's default max_num_seqs (get_batch_defaults): 256 below 70 GiB or on an A100, 1024 from 70 GiB."""
    assert _severities(["--max-num-active-seqs", "1024"], instanceType="ml.p5.48xlarge") == []  # H100
    assert _severities(["--max-num-active-seqs", "1025"], instanceType="ml.p5.48xlarge") == ["error"]
    assert _severities(["--max-num-active-seqs", "512"], instanceType="ml.p4de.24xlarge") == ["error"]  # A100
    assert _severities(["--max-num-active-seqs", "256"], instanceType="ml.p4de.24xlarge") == []
    throughput = ["--max-num-active-seqs", "512", "--performance-mode", "throughput"]
    assert _severities(throughput, instanceType="ml.p4de.24xlarge") == []  # doubled to 512
    assert _severities(["--max-num-active-seqs", "512"], instanceType="ml.no-such.xlarge") == ["warning"]
    assert _severities(["--max-num-active-seqs", "2048"], instanceType="ml.no-such.xlarge") == ["error"]
    cpu = copy.deepcopy(GOOD)
    cpu["engine"] = {"accelerator": "cpu"}
    assert [f.severity for f in _run(["--max-num-active-seqs", "200"], cpu)] == ["error"]  # 128 a rank
    assert [f.severity for f in _run(["--max-num-active-seqs", "200", "-tp", "2"], cpu)] == []


def test_cpu_budget_scales_with_world_size() -> None:
    cpu = copy.deepcopy(GOOD)
    cpu["engine"] = {"accelerator": "cpu"}
    assert [f.severity for f in _run(["--max-num-seqs", "3000"], cpu)] == ["error"]
    assert [f.severity for f in _run(["--max-num-seqs", "3000", "-tp", "2"], cpu)] == []


def test_the_message_names_the_item_and_values() -> None:
    (found,) = _run(["--enforce-eager", "--max-num-batched-tokens", "4096", "--no-enable-chunked-prefill"])
    assert found.path == "models[0].extraArgs[1]"
    assert "4096" in found.message and "8192" in found.message and "chunked prefill off" in found.message
