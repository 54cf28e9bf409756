"""kvtier.upstream.vllm_args against vLLM's own parser (the pinned vLLM in the engine venv, through
tests/harness/engine/vllm_parser_probe.py): generated `vllm serve` argvs, each flag the toolkit reads spelled
every way vLLM takes (underscores, `=`, prefixes, short forms, `--no-`, dotted JSON keys, repeated), must read
the same in our view as in the namespace vLLM parses; and the facts the view rests on must hold for vLLM's
option strings (no other option is a prefix of one we read, the short forms and booleans are what we take them
for)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from harness import engine as engine_probes
from kvtier.upstream import vllm_args
from kvtier.upstream.vllm_args import KNOWN

PROBE = Path(engine_probes.__file__).with_name("vllm_parser_probe.py")
BASE = ["serve", "tiny-model"]
# flag -> (namespace attribute, values to draw from, how our text compares with vLLM's parsed value)
TRACKED: dict[str, tuple[str, list[str], Any]] = {
    "--tensor-parallel-size": ("tensor_parallel_size", ["1", "2", "4"], int),
    "--pipeline-parallel-size": ("pipeline_parallel_size", ["1", "2"], int),
    "--max-model-len": ("max_model_len", ["1024", "8192", "4k"], None),
    "--block-size": ("block_size", ["16", "32", "128"], int),
    "--gpu-memory-utilization": ("gpu_memory_utilization", ["0.5", "0.9"], float),
    "--port": ("port", ["8000", "9001"], int),
    "--host": ("host", ["0.0.0.0", "127.0.0.1"], str),
    "--dtype": ("dtype", ["float16", "bfloat16", "auto"], str),
    "--kv-cache-dtype": ("kv_cache_dtype", ["auto", "fp8"], str),
    "--revision": ("revision", ["main", "0123abc"], str),
    "--prefix-caching-hash-algo": ("prefix_caching_hash_algo", ["sha256", "xxhash"], str),
    "--served-model-name": ("served_model_name", ["a", "b/c"], list),
    "--enable-prefix-caching": ("enable_prefix_caching", [], bool),
    "--kv-transfer-config": (
        "kv_transfer_config",
        ['{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}'],
        dict,
    ),
    "--kv-events-config": (
        "kv_events_config",
        ['{"enable_kv_cache_events": true, "publisher": "zmq"}'],
        dict,
    ),
}
DOTTED = {  # JSON flags -> (key, value) pairs a dotted name sets
    "--kv-transfer-config": [
        ("kv_role", "kv_both"),
        ("kv_load_failure_policy", "recompute"),
        ("engine_id", "e1"),
        ("kv_port", "14600"),
        ("kv_connector_extra_config.block_size", "64"),
    ],
    "--kv-events-config": [("publisher", "zmq"), ("enable_kv_cache_events", "true")],
}


def spell(flag: str, rng: random.Random) -> str:
    """The flag, or its short form, in a spelling vLLM may take: underscores, a prefix (perhaps one vLLM
    finds ambiguous), `--no-` for a boolean."""
    options = [o for o, (f, _) in KNOWN.items() if f == flag]
    option = rng.choice(options)
    if not option.startswith("--"):
        return rng.choice([option, option[:-1]])
    name = "".join(c if c != "-" or rng.random() < 0.5 else "_" for c in option[2:])
    if rng.random() < 0.25:
        name = name[: rng.randint(max(3, len(name) // 2), len(name))].rstrip("-_")
    return "--" + name


def setting(flag: str, rng: random.Random) -> list[str]:
    item = spell(flag, rng)
    if TRACKED[flag][2] is bool:
        return [item]
    if flag in DOTTED and item.startswith("--") and rng.random() < 0.4:
        key, value = rng.choice(DOTTED[flag])
        return [f"{item}.{key}={value}"] if rng.random() < 0.5 else [f"{item}.{key}", value]
    value = rng.choice(TRACKED[flag][1])
    return [f"{item}={value}"] if rng.random() < 0.4 else [item, value]


def argvs(count: int, seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        argv = list(BASE)
        for _ in range(rng.randint(1, 6)):
            argv += setting(rng.choice(list(TRACKED)), rng)
        out.append(argv)
    return out


# What vLLM must refuse or ignore, as the view assumes (case-sensitive names, one argument per item, a
# config file read only from the exact item `--config`).
EDGE = {
    "case": [*BASE, "--MAX-MODEL-LEN", "1"],
    "one item": [*BASE, "--max-model-len 8192"],
    "config file, two items": [*BASE, "--config", "/nonexistent/serve.yaml"],
    "config file, one item": [*BASE, "--config=/nonexistent/serve.yaml"],
}


@pytest.fixture(scope="module")
def vllm_reads(work: Path, run_probe) -> dict[str, Any]:
    cases = argvs(600, 20261202) + list(EDGE.values())
    request = work / "parser-cases.json"
    request.write_text(json.dumps({"dests": [d for d, _, _ in TRACKED.values()], "argvs": cases}))
    proc = run_probe(PROBE, request)
    assert proc.returncode == 0, proc.stderr[-3000:]
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"options": answer["options"], "cases": list(zip(cases, answer["cases"], strict=True))}


def _ours(view: vllm_args.Argv, flag: str) -> Any:
    text = view.value(flag)
    kind = TRACKED[flag][2]
    if text is None:
        return None
    if kind is bool:
        return text == "true"
    if kind is list:
        last = view.last(flag)
        return [text, *(last.more if last else ())]
    if kind is dict:
        return json.loads(text)
    return kind(text) if kind else text


def _same(flag: str, ours: Any, theirs: Any) -> bool:
    if TRACKED[flag][2] is dict:  # vLLM fills the config class's other fields with their defaults ...
        same_keys = all(theirs.get(k) == v for k, v in ours.items())
        # ... so a connector the view does not see must be none to vLLM either (dotted keys replace the JSON)
        return same_keys and (
            flag != "--kv-transfer-config" or theirs.get("kv_connector") == ours.get("kv_connector")
        )
    if flag == "--max-model-len":  # vLLM reads human-readable sizes (4k = 4000)
        return theirs == (4000 if ours == "4k" else int(ours))
    return ours == theirs


def test_our_view_is_vllms_for_every_argv_it_accepts(vllm_reads: dict[str, Any]) -> None:
    accepted = 0
    for argv, parsed in vllm_reads["cases"][: -len(EDGE)]:
        view = vllm_args.read(argv)
        if not parsed["ok"]:
            # Refused only for what our view does not take for a flag vLLM has either: a prefix vLLM finds
            # ambiguous (our view expands it to the flag it knows), or an item it reads as no known flag.
            error = parsed["error"]
            ambiguous = [s for s in view.settings if s.matches and s.matches[0] != s.name]
            unknown = [s.item for s in view.settings if not s.matches]
            assert (ambiguous and "ambiguous option" in error) or (
                "unrecognized arguments" in error and any(item in error for item in unknown)
            ), (argv, error)
            continue
        accepted += 1
        for flag, (dest, _, _) in TRACKED.items():
            if view.all(flag):
                assert _same(flag, _ours(view, flag), parsed["values"][dest]), (
                    argv,
                    flag,
                    parsed["values"][dest],
                )
    assert accepted > 400  # most generated argvs are valid: the comparison is not vacuous


def test_vllm_refuses_or_ignores_what_the_view_assumes(vllm_reads: dict[str, Any]) -> None:
    results = dict(zip(EDGE, (parsed for _, parsed in vllm_reads["cases"][-len(EDGE) :]), strict=True))
    assert not results["case"]["ok"] and "unrecognized arguments" in results["case"]["error"]
    assert not results["one item"]["ok"] and "unrecognized arguments" in results["one item"]["error"]
    assert not results["config file, two items"]["ok"]  # vLLM went for the file
    assert results["config file, one item"]["ok"]  # ... and here never did


def test_the_options_we_know_are_vllms(vllm_reads: dict[str, Any]) -> None:
    options = vllm_reads["options"]
    dests = {flag: dest for flag, (dest, _, _) in TRACKED.items()}
    for option, (flag, kind) in KNOWN.items():
        assert option in options, option
        if flag in dests:
            assert options[option]["dest"] == dests[flag], option
        assert options[option]["boolean"] == (kind in ("true", "false")), option
        assert (options[option]["nargs"] == "+") == (kind == "list"), option


def test_no_other_option_of_vllm_is_a_prefix_of_one_we_read(vllm_reads: dict[str, Any]) -> None:
    # What lets the view (and the chart) take any prefix of a flag it knows for that flag: argparse prefers
    # an exact option, and no option of vLLM's is a shorter spelling of one of ours.
    shadowing = [(o, k) for o in vllm_reads["options"] for k in KNOWN if k != o and k.startswith(o)]
    assert shadowing == []
