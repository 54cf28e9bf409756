"""The offline judge of `vllm serve` arguments (kvtier.upstream.vllm_options) against the pinned vLLM:
the committed table is what vLLM's parser dumps today, and on a few hundred seeded random extraArgs
(options of the table with valid and invalid values, in vLLM's other spellings, unknown flags, stray
values) after the argv the chart renders for values/cpu.yaml, the judge refuses nothing vLLM accepts and
refuses what vLLM refuses at the stages the table covers, but for the excused kinds listed below.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvtier import helm, paths
from kvtier.engine_rig import rig
from kvtier.upstream import vllm_options

DUMP = Path(rig.__file__).with_name("vllm_options_dump.py")
PROBE = Path(rig.__file__).with_name("vllm_args_probe.py")
CHART = paths.CHARTS / "kv-tiered-inference"
CASES = int(os.environ.get("KVTIER_CASES", "400"))
SEED = int(os.environ.get("KVTIER_SEED", "20250604"))
# Options the generator leaves out: their refusals are other rules' (engine-args-reserved,
# engine-args-config-file) and they rewrite the argv before argparse (`--model` moves to the front).
LEFT_OUT = {"--model", "--config", "--help"}
# The stages where the table holds the facts: argparse's, and the config classes' field bounds.
BOUND_STAGES = set(vllm_options.STAGES.values())
BOUND_ERROR = re.compile(r"Input should be (greater|less) than")
# Refusals the judge may miss, by why: the option's converter is vLLM's own (a pydantic config class, a
# lambda, union_dict_and_str) or its action is (LoRAParserAction), which the table does not model.
EXCUSED = {
    "opaque": "the option's converter or action is vLLM's own code, which the table does not model",
    "negative decimal": "vLLM's dotted-key rewriting moves a -0.5 item and the next to the end as `-0 JSON`, "
    "where a list flag may take them; the judge then refuses the -0.5 alone, or nothing",
}
NEGATIVE_DECIMAL = re.compile(r"^-\d*\.\d+$")
UNKNOWN_FLAGS = ("--no-such-flag", "--swap-space", "-x", "--enable-prefix", "--kv-cache")
WORDS = ("lots", "true", "None", "", "auto", "8k", "1.5K", "-0.5", '{"a": 1}', "fp8")


def test_the_committed_table_is_a_fresh_dump(work: Path) -> None:
    out = work / "vllm_serve_options.json"
    proc = subprocess.run(
        [str(rig.engine_python()), str(DUMP), str(out)], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out.read_text() == vllm_options.TABLE.read_text(), (
        f"{vllm_options.TABLE.relative_to(paths.ROOT)} is not what the pinned vLLM dumps: run kvtier generate"
    )


def base_argv() -> list[str]:
    """The vllm container's args the chart renders for values/cpu.yaml (its first engine)."""
    helm.build_dependencies(CHART)
    result = helm.run(["template", "kv", str(CHART), "--values", str(paths.VALUES / "cpu.yaml")], timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    for doc in yaml.safe_load_all(result.stdout):
        if doc and doc["kind"] in ("Deployment", "StatefulSet"):
            for c in doc["spec"]["template"]["spec"]["containers"]:
                if c.get("command") == ["vllm"]:
                    return [str(a) for a in c["args"]]
    raise AssertionError("values/cpu.yaml: no vllm container rendered")


def _value(rng: random.Random, option: vllm_options.Option) -> str:
    pool = [*WORDS, "0", "-1", "1", "7", "0.5", "1.5", "2", str(rng.randint(2, 70_000))]
    if option.choices:
        pool += [c for c in option.choices if c is not None] * 3
    if option.bounds:  # around the bounds: 0 and -1 break most, 1 and 0.5 hold for most
        pool += ["0", "-1", "1", "0.5"] * 3
    return rng.choice(pool)


def _spell(rng: random.Random, string: str, t: vllm_options.Table) -> str:
    """The option string as written: as is, with underscores, or a unique prefix."""
    roll = rng.random()
    if string.startswith("--") and roll < 0.2:
        return "--" + string[2:].replace("-", "_")
    if string.startswith("--") and roll < 0.35:
        for cut in range(len(string) - 1, 3, -1):
            prefix = string[:cut]
            if [s for s in t.by_string if s.startswith(prefix)] == [string]:
                return prefix
    return string


def _group(rng: random.Random, t: vllm_options.Table, strings: list[str]) -> list[str]:
    roll = rng.random()
    if roll < 0.08:
        return [rng.choice(UNKNOWN_FLAGS), *rng.choice([[], ["1"]])]
    if roll < 0.12:
        return [rng.choice(WORDS[:2])]  # a stray value
    string = rng.choice(strings)
    option = t.by_string[string]
    name = _spell(rng, string, t)
    if option.nargs == 0:
        return rng.choice([[name], [name], [f"{name}=true"], [name, "true"]])
    form = rng.random()
    value = _value(rng, option)
    if form < 0.1:
        return [name]  # the value missing
    if form < 0.2 and name.startswith("--"):
        return [f"{name}.key", value]  # a dotted JSON key
    if form < 0.45 and name.startswith("--"):
        return [f"{name}={value}"]
    if option.nargs in ("+", "*") and form > 0.9:
        return [name, value, _value(rng, option)]
    return [name, value]


def cases(t: vllm_options.Table) -> list[list[str]]:
    rng = random.Random(SEED)
    strings = sorted(s for s, o in t.by_string.items() if not set(o.strings) & LEFT_OUT)
    return [
        [item for _ in range(rng.choice((1, 1, 2, 3))) for item in _group(rng, t, strings)]
        for _ in range(CASES)
    ]


def _named(verdict: dict[str, Any], t: vllm_options.Table) -> vllm_options.Option | None:
    """The option the probe's refusal names (its flag, else the first flag in its message)."""
    named = verdict.get("flag") or next(iter(re.findall(r"--[a-z0-9-]+", verdict["error"])), "")
    return t.by_string.get(named)


def _excuse(extra: list[str], verdict: dict[str, Any], t: vllm_options.Table) -> str:
    """Which of EXCUSED a refusal the judge misses falls under ("" when none)."""
    option = _named(verdict, t)
    understood = option is not None and (
        option.type in ("int", "float", "str", "json") or option.accepts is not None
    )
    if option is not None and (not understood or option.action.startswith("other")):
        return "opaque"
    if any(NEGATIVE_DECIMAL.match(item) for item in extra):
        return "negative decimal"
    return ""


def _covered(verdict: dict[str, Any], t: vllm_options.Table) -> bool:
    """Whether the table holds the facts of the probe's refusal: argparse's, or a bound it recorded."""
    if verdict["stage"] == "argparse":
        return True
    option = _named(verdict, t)
    bounded = option is not None and bool(option.bounds)
    return verdict["stage"] in BOUND_STAGES and bounded and bool(BOUND_ERROR.search(verdict["error"]))


@pytest.fixture(scope="module")
def judged(work: Path, run_probe, need) -> list[tuple[list[str], list[vllm_options.Problem], dict[str, Any]]]:
    """(extraArgs, the judge's problems, the probe's verdict on the chart's argv plus them) per case."""
    need((paths.TOOLS_BIN / "helm3").exists(), "pinned helm3 not built (make tools)")
    t = vllm_options.table()
    base = base_argv()
    extras = cases(t)
    request = work / "cases.json"
    request.write_text(json.dumps([base + extra for extra in extras]))
    proc = run_probe(PROBE, request)
    verdicts = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and len(verdicts) == len(extras), proc.stderr[-3000:]
    return [(extra, vllm_options.problems(extra), v) for extra, v in zip(extras, verdicts, strict=True)]


def test_the_judge_refuses_nothing_vllm_accepts(judged) -> None:
    wrong = [(extra, [p.message for p in found]) for extra, found, v in judged if found and v["ok"]]
    assert not wrong, f"{len(wrong)} refused offline, accepted by vLLM: {wrong[:5]}"


def test_the_judge_refuses_what_vllm_refuses_where_the_table_knows(judged) -> None:
    t = vllm_options.table()
    tally: Counter[tuple[str, str]] = Counter()
    missed = []
    for extra, found, v in judged:
        stage = v["stage"] if not v["ok"] else "accepted"
        covered = not v["ok"] and _covered(v, t)
        excuse = _excuse(extra, v, t) if covered and not found else ""
        outcome = "both" if found else (f"excused ({excuse})" if excuse else "missed")
        if stage == "accepted":
            outcome = "both accept" if not found else "false refusal"
        elif not covered:
            outcome = "not covered, judge " + ("refused too" if found else "accepted")
        tally[(stage, outcome)] += 1
        if outcome == "missed":
            missed.append((extra, v["flag"], v["error"][:300]))
    for (stage, outcome), n in sorted(tally.items()):
        print(f"{stage:18} {outcome:34} {n}")
    assert not missed, f"{len(missed)} refused by vLLM where the table knows, not offline: {missed[:8]}"
    refused = sum(n for (stage, outcome), n in tally.items() if outcome == "both")
    bounded = sum(n for (stage, outcome), n in tally.items() if outcome == "both" and stage in BOUND_STAGES)
    assert refused >= CASES // 4 and bounded, "too few refusals: the generator no longer tests the judge"
