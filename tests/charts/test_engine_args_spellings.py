"""Every spelling vLLM reads as a flag the chart owns is refused, by `kvtier validate` and by the chart, on
both targets: underscores anywhere in the name, `--flag=value`, prefixes argparse expands (`--max-model`,
`-t`), dotted JSON keys (`--kv-transfer-config.kv_role`), the flag repeated with the last value differing.

The chart reads extraArgs with its own template helpers (vllmOptions, reservedFlagOf in _engine.tpl), a
mirror of kvtier.upstream.vllm_args: generated argvs are read by both, in one render of a copy of the chart
that holds one more template, and must come out the same; a sample of spellings is rendered for real on each
target, where the chart must fail naming the flag. What vLLM itself makes of the spellings is measured in
tests/engine/test_vllm_args_view.py.
"""

from __future__ import annotations

import copy
import functools
import json
import random
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from render import helm_bin, render, render_docs

from kvtier import helm, paths
from kvtier.upstream import vllm_args
from kvtier.validate import catalogue
from kvtier.validate.checks.engine_args_rules import NATIVE_RESERVED, RESERVED, option_strings
from kvtier.validate.inputs import loader
from kvtier.validate.rules import ValuesContext

CHART = paths.CHARTS / "kv-tiered-inference"
STANDALONE = paths.VALUES / "prod-native-g6e-4xlarge.yaml"  # native: the prefix hash is reserved too
HYPERPOD = paths.VALUES / "hyperpod-g6e-4xlarge.yaml"
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
OPTIONS = sorted(option_strings([*RESERVED, *NATIVE_RESERVED]))
BENIGN = [
    "--max-num-seqs",
    "--block-size",
    "--kv-cache-dtype",
    "--seed",
    "--enforce-eager",
    "--chat-template",
]
VALUES = ["4", "8192", "-1", "-0.5", "x.y", "a b", "{}", '{"kv_role": "kv_both"}', "auto"]
# A template the copy of the chart gets: each case of .Values.spellingCases read by the chart's helpers.
PROBE_TEMPLATE = """\
{{- $reserved := include "kv-tiered-inference.reservedEngineFlags" (dict "root" $ "model" dict)
  | splitList " " -}}
{{- $out := list -}}
{{- range .Values.spellingCases -}}
{{- $options := include "kv-tiered-inference.vllmOptions" (dict "args" .) | fromJsonArray -}}
{{- $hits := list -}}
{{- range $options -}}
{{- $read := dict "name" .name "item" .item "reserved" $reserved -}}
{{- $hits = append $hits (include "kv-tiered-inference.reservedFlagOf" $read) -}}
{{- end -}}
{{- $out = append $out (dict "options" $options "hits" $hits) -}}
{{- end }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: spelling-probe
data:
  cases: {{ toJson $out | quote }}
"""


def spell(option: str, rng: random.Random) -> str:
    """One spelling of an option that vLLM reads as that option (or refuses as an ambiguous prefix)."""
    if not option.startswith("--"):
        return rng.choice([option, option[:-1]])  # -tp, or the prefix -t argparse expands
    words = option[2:].split("-")
    name = words[0] + "".join(rng.choice("-_") + w for w in words[1:])
    if rng.random() < 0.3:
        name = name[: rng.randint(1, len(name))].rstrip("-_") or name[0]
    return "--" + name


def spelled_case(option: str, rng: random.Random) -> tuple[list[str], int]:
    """extraArgs that set `option` in some spelling among other flags, and the index of the item that does."""
    item = spell(option, rng)
    boolean = vllm_args.KNOWN[option][1] in ("true", "false")
    form = rng.choice(["apart", "equals", "dotted", "repeated"])
    if form == "dotted" and option.startswith("--"):
        setting = [f"{item}.{rng.choice(['kv_role', 'a.b', 'x+'])}", rng.choice(VALUES)]
    elif form == "equals":  # argparse expands no single-dash prefix written with `=`
        setting = [
            f"{option if item.startswith('-') and not item.startswith('--') else item}={rng.choice(VALUES)}"
        ]
    elif form == "repeated" and not boolean:
        setting = [item, "1", spell(option, rng) + "=2"]
    else:
        setting = [item] if boolean else [item, rng.choice(VALUES[:3])]
    before = rng.choice([[], ["--enforce-eager"], ["--max-num-seqs", "4"], ["--seed=0", "--enforce-eager"]])
    return [*before, *setting, *rng.choice([[], ["--max_num_seqs", "8"]])], len(before)


def random_argv(rng: random.Random) -> list[str]:
    """Any mix of reserved and other flags, spelled every way, with values of every shape."""
    out: list[str] = []
    for _ in range(rng.randint(0, 6)):
        roll = rng.random()
        if roll < 0.4:
            out += spelled_case(rng.choice(OPTIONS), rng)[0]
        elif roll < 0.7:
            out += [spell(rng.choice(BENIGN), rng), rng.choice(VALUES)]
        else:
            out.append(rng.choice([*VALUES, "--", "-", "-O3", "-O", "--x.y", "--max-model-len 8192"]))
    return out


@functools.cache
def _environment(target: str) -> dict[str, Any]:
    values = yaml.safe_load((STANDALONE if target == "standalone" else HYPERPOD).read_text())
    return {"target": target, "cache": values.get("cache", {}), "models": values["models"][:1]}


def refused_by_validate(extra_args: list[str], target: str) -> list[Any]:
    values = copy.deepcopy(_environment(target))
    values["models"][0]["extraArgs"] = extra_args
    loaded = loader.load_text(yaml.dump(values, Dumper=DUMPER, sort_keys=False), Path("env.yaml"))
    return catalogue.run_values(ValuesContext(loaded.data, loaded), only=["engine-args-reserved"])


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    option=st.sampled_from(OPTIONS),
    seed=st.integers(0, 2**32),
    target=st.sampled_from(["standalone", "hyperpod"]),
)
def test_validate_refuses_every_spelling_of_a_reserved_flag(option: str, seed: int, target: str) -> None:
    if target == "hyperpod" and vllm_args.KNOWN[option][0] in NATIVE_RESERVED:
        target = "standalone"  # the native backend, whose flag it is, runs on standalone only
    extra_args, at = spelled_case(option, random.Random(seed))
    findings = refused_by_validate(extra_args, target)
    assert any(f.path == f"models[0].extraArgs[{at}]" for f in findings), (extra_args, findings)
    flag = vllm_args.KNOWN[option][0]
    assert any(flag in f.message and f.line is not None for f in findings), (extra_args, findings)


def test_validate_leaves_other_flags_alone() -> None:
    rng = random.Random(7)
    for _ in range(100):
        extra_args = [a for _ in range(3) for a in (spell(rng.choice(BENIGN[:4]), rng), "4")]
        extra_args = [a for a in extra_args if len(a) > 5]  # no prefix short enough to be a reserved flag's
        assert refused_by_validate(extra_args, rng.choice(["standalone", "hyperpod"])) == [], extra_args


@pytest.fixture(scope="module")
def chart_reads(
    need, tmp_path_factory: pytest.TempPathFactory
) -> tuple[list[list[str]], list[dict[str, Any]]]:
    """2,000 generated argvs and what the chart's helpers read in each, from one render of a chart copy."""
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    helm.build_dependencies(CHART)
    copy_dir = tmp_path_factory.mktemp("chart") / CHART.name
    shutil.copytree(CHART, copy_dir)
    (copy_dir / "templates" / "zz-spelling-probe.yaml").write_text(PROBE_TEMPLATE)
    (copy_dir / "values.schema.json").unlink()  # the copy takes the cases as a value of its own
    rng = random.Random(20261202)
    cases = [random_argv(rng) for _ in range(2000)]
    cases += [spelled_case(o, rng)[0] for o in OPTIONS for _ in range(20)]
    values = tmp_path_factory.mktemp("values") / "cases.yaml"
    values.write_text(yaml.safe_dump({"spellingCases": cases}))
    docs = render_docs(
        copy_dir, values=[STANDALONE, values], extra=["--show-only", "templates/zz-spelling-probe.yaml"]
    )
    return cases, json.loads(docs[0]["data"]["cases"])


def test_the_chart_reads_argvs_as_validate_does(chart_reads) -> None:
    cases, reads = chart_reads
    reserved = option_strings([*RESERVED, *NATIVE_RESERVED])
    for argv, read in zip(cases, reads, strict=True):
        view = vllm_args.read(argv)
        assert [(o["index"], o["name"]) for o in read["options"]] == [
            (s.index, s.name) for s in view.settings
        ], argv
        for setting, hit in zip(view.settings, read["hits"], strict=True):
            expected = set(setting.matches) & reserved
            assert (hit in expected) if expected else hit == "", (argv, setting, hit)


def test_every_reserved_flag_is_generated_and_refused_by_the_chart_helpers(chart_reads) -> None:
    _, reads = chart_reads
    refused = {vllm_args.KNOWN[h][0] for read in reads for h in read["hits"] if h}
    assert refused == set(RESERVED) | set(NATIVE_RESERVED)


@pytest.mark.parametrize("option", OPTIONS)
def test_the_chart_refuses_a_spelling_on_each_target(need, tmp_path: Path, option: str) -> None:
    need(helm_bin(3).exists(), "pinned Helm 3 not built (make tools)")
    helm.build_dependencies(CHART)
    rng = random.Random(option)
    targets = [STANDALONE] if vllm_args.KNOWN[option][0] in NATIVE_RESERVED else [STANDALONE, HYPERPOD]
    for base in targets:
        extra_args, at = spelled_case(option, rng)
        values = yaml.safe_load(base.read_text())
        values["models"] = [{**copy.deepcopy(values["models"][0]), "extraArgs": extra_args}]
        file = tmp_path / f"{base.stem}.yaml"
        file.write_text(yaml.safe_dump(values))
        result = render(CHART, values=[file])
        assert result.returncode != 0, (base.name, extra_args)
        found = re.search(r"models\[[\w-]+\]\.extraArgs: (\S+) is set by the chart", result.stderr)
        assert found and vllm_args.KNOWN[found.group(1)][0] in (
            vllm_args.KNOWN[m][0] for m in vllm_args.resolve(vllm_args.canonical_name(extra_args[at]))
        ), (base.name, extra_args, result.stderr[-800:])


def test_the_chart_lists_the_reserved_flags_validate_holds() -> None:
    text = (CHART / "templates" / "_engine.tpl").read_text()
    body = text.split('define "kv-tiered-inference.reservedEngineFlags"', 1)[1].split("{{- end -}}\n\n", 1)[0]
    assert set(re.findall(r"(?<![\w-])(-{1,2}[a-z][a-z-]*)", body)) == option_strings(
        [*RESERVED, *NATIVE_RESERVED]
    )
