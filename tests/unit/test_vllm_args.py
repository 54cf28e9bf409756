"""kvtier.upstream.vllm_args: argvs as vLLM's parser reads them, fact by fact (each fact is measured against
vLLM itself in tests/engine/test_vllm_args_view.py)."""

from __future__ import annotations

import json

import pytest

from kvtier.upstream.vllm_args import how_read, read

# argv -> the flag, the value vLLM ends up with, and the index of the item that sets it
CASES = [
    (["--max-model-len", "8192"], "--max-model-len", "8192", 0),
    (["--max_model_len", "8192"], "--max-model-len", "8192", 0),  # underscores in the name are dashes
    (["--max-model-len=8192"], "--max-model-len", "8192", 0),  # `=` splits
    (["--max_model_len=8_192"], "--max-model-len", "8_192", 0),  # ... and the value keeps its underscores
    (
        ["--max-model-len", "1", "--enforce-eager", "--max_model_len=2"],
        "--max-model-len",
        "2",
        3,
    ),  # last wins
    (["--max-model", "4096"], "--max-model-len", "4096", 0),  # a prefix argparse expands
    (["-tp", "2"], "--tensor-parallel-size", "2", 0),  # the short form
    (["-tp=2"], "--tensor-parallel-size", "2", 0),
    (["-t", "2"], "--tensor-parallel-size", "2", 0),  # a prefix of the short form
    (["--enable-prefix-caching"], "--enable-prefix-caching", "true", 0),  # a boolean takes no value
    (["--enable-prefix-caching", "--no_enable_prefix_caching"], "--enable-prefix-caching", "false", 1),
    (["--max-model-len", "-1"], "--max-model-len", "-1", 0),  # a negative number is a value
    (["--served-model-name", "a", "b"], "--served-model-name", "a", 0),  # nargs="+": the first name
    (["--dtype", "--max-model-len", "1"], "--dtype", None, 0),  # an option is no value: vLLM refuses
    (["-O3"], "--optimization-level", "3", 0),
    (["-O", "2"], "--optimization-level", "2", 0),
    (["-O=1"], "--optimization-level", "1", 0),
]


@pytest.mark.parametrize(("argv", "flag", "value", "index"), CASES)
def test_an_argv_reads_as_vllm_reads_it(argv: list[str], flag: str, value: str | None, index: int) -> None:
    view = read(argv)
    assert view.value(flag) == value
    last = view.last(flag)
    assert last is not None and last.index == index


def test_dotted_keys_replace_the_whole_json_value_wherever_it_is() -> None:
    argv = ["--kv_transfer_config.kv_role", "kv_producer", "--kv-transfer-config", '{"kv_connector": "X"}']
    view = read(argv)
    # vLLM passes the gathered keys after everything else: they win over the whole JSON, which they replace
    assert json.loads(view.value("--kv-transfer-config") or "") == {"kv_role": "kv_producer"}
    assert view.last("--kv-transfer-config") == view.settings[0]


def test_dotted_keys_merge_by_the_name_as_written_and_the_last_name_wins() -> None:
    argv = [
        "--kv-transfer-conf.kv_port=1",
        "--kv-transfer-config.engine_id=e",
        "--kv_transfer_conf.kv_role=r",
    ]
    view = read(argv)
    # `--kv-transfer-conf` (a prefix) gathers its own object, passed first; `--kv-transfer-config`'s wins
    assert json.loads(view.value("--kv-transfer-config") or "") == {"engine_id": "e"}
    assert view.last("--kv-transfer-config") == view.settings[1]


def test_dotted_keys_of_one_flag_merge() -> None:
    view = read(["--x.a.b=1", "--x.a.c", "8k", "--x.l+", "p,q", "--x.l+=r", "--x.s", "--y"])
    assert json.loads(view.value("--x") or "") == {"a": {"b": 1, "c": 8000}, "l": ["p", "q", "r"], "s": "--y"}


def test_items_that_are_no_options() -> None:
    view = read(["serve", "model", "--max-model-len 8192", "--port", "8000", "--", "--dtype", "half"])
    assert view.positionals == (
        (0, "serve"),
        (1, "model"),
        (2, "--max-model-len 8192"),
        (6, "--dtype"),
        (7, "half"),
    )
    assert view.value("--max-model-len") is None and view.value("--dtype") is None
    assert view.value("--port") == "8000"


def test_names_are_case_sensitive_and_unknown_flags_keep_their_name() -> None:
    view = read(["--MAX-MODEL-LEN", "1", "--max_num_seqs=4"])
    assert view.value("--max-model-len") is None
    assert [(s.flag, s.value) for s in view.settings] == [("--MAX-MODEL-LEN", "1"), ("--max-num-seqs", "4")]


def test_an_ambiguous_prefix_stands_for_no_one_flag() -> None:
    [setting] = read(["--p", "1"]).settings
    assert setting.flag == "--p" and {"--port", "--pipeline-parallel-size"} <= set(setting.matches)
    assert "ambiguous" in how_read(setting)


@pytest.mark.parametrize(
    ("item", "phrase"),
    [
        ("--max_model_len", "underscores"),
        ("--max-mod", "a prefix of --max-model-len"),
        ("--no-enable-prefix-caching", "set false"),
        ("--kv-transfer-config.kv_role", "replaces the whole JSON value"),
    ],
)
def test_how_read_says_why_an_item_is_its_flag(item: str, phrase: str) -> None:
    assert phrase in how_read(read([item, "x"]).settings[0])
    assert how_read(read(["--max-model-len", "1"]).settings[0]) == ""
