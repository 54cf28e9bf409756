"""Differential property test: `kvtier validate` against the real judges of a deployment, asked directly.

Files are generated from every environment in values/ by seeded mutations drawn across the whole chart
schema and every value of every environment (harness/values_mutations.py), and by mutations of their own for
vLLM's scheduler budget, a pod's sysctls and vLLM's stats switch. Each file goes to the real judges through
their own interfaces, not through validate (harness/judges.py): the pinned Helm 3 renders it, the test
cluster's API server dry-runs every object (the official client's dynamic client; it judges the sysctls'
names and the host-network ones), and the pinned vLLM parses the argv of every engine on an image built on
it, then its SchedulerConfig judges the engine's scheduler settings with the batch defaults vLLM fills in
on the engine's GPU (every GPU of the instance table where the pod names no instance type; where they
disagree the node decides, and no refusal is counted). The same files go to `kvtier validate` in its
default mode (the API server's dry run included, as a user gets it); its verdict without the API server's
row is the `--offline` mode's.

Properties:
- every file a real judge refuses, validate's default mode refuses, naming a values key (a miss outside
  EXPECTED_MISSES fails the test);
- validate's schema layer refuses only files Helm refuses (the schema judges the values Helm merges: a
  partial override of anything the chart supplies passes);
- vllm-scheduler-budget refuses no file whose every engine vLLM's SchedulerConfig accepted on every GPU it
  may run on;
- engine-metrics-disabled speaks exactly where vLLM's parser reads stats off for an engine that the
  chart's rendered ScaledObject or PrometheusRule queries vllm:* series of;
- no file makes validate raise.
The miss rates, per category of the judge's refusal, are printed for both modes, with the refusals only
validate makes (rules for what no judge here sees: the kubelet, LMCache, capacity), and how often each
category with a mutation of its own was drawn.

The second test draws a model and where validate finds its config.json (harness/facts_sources.py: the
stand-in Hub at a pinned revision, the shipped facts, `--model-config`, nowhere offline) and compares the
context-length and heads rules with vLLM's own checks fed the same config (harness/engine/
model_shape_probe.py); KVTIER_JUDGE_FACTS (default 24) sets how many.

KVTIER_JUDGE_FILES (default 250) sets how many files are judged, KVTIER_JUDGE_SEED the seed. The default
keeps CI's time: 1,000 files took 1,328 s on a two-core machine (2026-12-04), 500 took 1,129 s on a slower
one (2026-12-06), the longest module of the suite; the same seed's first 250 files are judged either way,
and a deeper run is `KVTIER_JUDGE_FILES=1000 make test` or this module alone.
With the categories' own draws and the facts-source test the module took 183 s, against 191 s for the
earlier single test run just before it (2026-12-06, two cores, load 1 to 5).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import random
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import config

from harness import engine as engine_probes
from harness import facts_sources, hub_stand_in, judges, values_mutations
from kvtier import paths, toolchain
from kvtier.cluster.common.rest import Rest
from kvtier.engine_rig import rig
from kvtier.engine_rig.errors import RigError
from kvtier.validate import catalogue, pipeline
from kvtier.validate.findings import SERVER
from kvtier.validate.inputs import loader
from kvtier.validate.inputs.origins import Origins
from kvtier.validate.layers import render, server
from kvtier.validate.rules import ValuesContext

FILES = int(os.environ.get("KVTIER_JUDGE_FILES", "250"))
SEED = int(os.environ.get("KVTIER_JUDGE_SEED", "20261204"))
VALIDATE_NS = "judged"
SCHEDULER_RULE, METRICS_RULE = "vllm-scheduler-budget", "engine-metrics-disabled"
# The categories drawn by their own mutations (harness/values_mutations.py), by how each describes itself.
DRAWN = {"scheduler:": "scheduler budget", "sysctl (": "sysctls", "metrics:": "stats switch"}
OPTIONS = pipeline.Options(helm_majors=(3,), minors=("1.35",), namespace=VALIDATE_NS)
# Categories of refusal validate's default mode may miss, each with the reason. The default mode has the
# API server but not vLLM: `--vllm` (the engine venv, 6.6 GB) runs these checks; offline, the options
# table (kvtier.upstream.vllm_options) carries each flag's own type, choices and bounds only.
_CROSS_FIELD = "a check across several of vLLM's settings, run by `kvtier validate --vllm`"
EXPECTED_MISSES: dict[str, str] = {
    "vllm: parallel": f"{_CROSS_FIELD}: ParallelConfig's ~30 combinations of TP, PP, DP, DCP, PCP, EPLB",
    "vllm: serve-validate": f"{_CROSS_FIELD}: serve's frontend checks (--grpc-port needs the Rust frontend)",
    "vllm: engine-args": f"{_CROSS_FIELD}: EngineArgs.__post_init__ and its feature checks",
    "vllm: kv-connector": f"{_CROSS_FIELD}: the connector class --kv-transfer-config names",
    "vllm: kv-offloading": f"{_CROSS_FIELD}: the offloading spec built from --kv-transfer-config",
    "vllm: executor": f"{_CROSS_FIELD}: the executor class --distributed-executor-backend names",
}


def _engine_venv() -> bool:
    try:
        rig.engine_python()
    except RigError:
        return False
    return True


def _errors(report: pipeline.FileReport, offline: bool = False) -> list[Any]:
    return [f for f in report.findings if f.severity == "error" and not (offline and f.check == SERVER)]


def _oracle(helm3: Path, api: judges.ApiServer, path: Path) -> judges.Verdict:
    verdict = judges.Verdict()
    manifests, error = judges.helm_render(helm3, path, api.namespace)
    if manifests is None:
        verdict.refusals.append(("Helm", judges.helm_category(error), error.splitlines()[-1][:300]))
        return verdict
    verdict.manifests = manifests
    verdict.refusals += api.judge(manifests)
    verdict.engines = [e for e in judges.engines(manifests) if _pinned_vllm(e.image)]
    return verdict


def _pinned_vllm(image: str) -> bool:
    """Whether the pinned vLLM is the judge of an engine on this image: the chart's default image (the
    project pins its LMCache release to that vLLM), or an image tagged with the pinned vLLM's release
    (stock vLLM's `v<release>`, the CPU rig's `<release>-lmcache<x>`). Another image's vLLM is unknown
    here: validate only warns there, and no judge here can say more."""
    versions = toolchain.versions()
    tag = image.rsplit(":", 1)[-1]
    default = f"docker.io/lmcache/vllm-openai:v{versions['LMCACHE_VERSION']}"
    release = versions["VLLM_CPU_VERSION"]
    return image == default or tag == f"v{release}" or tag.startswith(f"{release}-")


def _add_vllm(verdicts: list[judges.Verdict]) -> float:
    """vLLM's refusals added to each verdict; the share of engines it accepted."""
    engines = [e for v in verdicts for e in v.engines]
    answers, extras = judges.vllm_verdicts([e.argv for e in engines], [e.devices for e in engines])
    pairs = iter(zip(answers, extras, strict=True))
    for verdict in verdicts:
        for _ in verdict.engines:
            answer, extra = next(pairs)
            verdict.engine_extras.append(extra)
            scheduler = extra["scheduler"]
            if not answer["ok"]:
                verdict.refusals.append(("vLLM", f"vllm: {answer['stage']}", answer["error"][:300]))
            # split: vLLM refuses on some of the GPUs the pod may land on, the node decides (a warning)
            elif scheduler and not scheduler["ok"] and not scheduler["split"]:
                message = " ".join(scheduler["error"].split())
                verdict.refusals.append(("vLLM", _scheduler_category(message), message[:300]))
    return sum(a["ok"] for a in answers) / max(len(answers), 1)


def _scheduler_category(message: str) -> str:
    """A SchedulerConfig refusal by the check that made it (vllm/config/scheduler.py)."""
    if "max_num_active_seqs" in message:
        return "vllm: scheduler: active seqs"
    if "long_prefill_token_threshold" in message:
        return "vllm: scheduler: long-prefill threshold"
    if "max_model_len" in message:
        return "vllm: scheduler: budget below max_model_len"
    return "vllm: scheduler: budget below max_num_seqs"


def _scheduler_over_refusal(verdict: judges.Verdict, report: pipeline.FileReport) -> bool:
    """validate refuses the scheduler budget of a file whose every engine vLLM's SchedulerConfig judged and
    accepted on every device it may run on."""
    schedulers = [extra["scheduler"] for extra in verdict.engine_extras]
    return (
        any(f.rule == SCHEDULER_RULE for f in _errors(report))
        and bool(schedulers)
        and all(s is not None and s["ok"] for s in schedulers)
    )


def _reads_vllm_metrics(manifests: list[dict[str, Any]], workload: str) -> bool:
    """Whether the chart's rendered KEDA ScaledObject for this workload, or its PrometheusRule's alerts,
    query a vllm:* series (what vLLM stops exporting with its stats off)."""
    for m in manifests:
        spec = m.get("spec") or {}
        queries = [str((t.get("metadata") or {}).get("query")) for t in spec.get("triggers") or []]
        target = (spec.get("scaleTargetRef") or {}).get("name")
        if m.get("kind") == "ScaledObject" and target == workload and any("vllm:" in q for q in queries):
            return True
        if m.get("kind") == "PrometheusRule":
            rules = [r for g in spec.get("groups") or [] for r in g.get("rules") or []]
            if any(r.get("alert") and "vllm:" in str(r.get("expr")) for r in rules):
                return True
    return False


def _metrics_expected(verdict: judges.Verdict) -> bool | None:
    """Whether an engine the chart's autoscaler or alerts read has stats off as vLLM's parser reads its argv;
    None where the parser refused an engine's argv (no reading to judge by)."""
    expected = False
    for engine, extra in zip(verdict.engines, verdict.engine_extras, strict=True):
        if extra["parsed"] is None:
            return None
        if extra["parsed"]["disable_log_stats"] and _reads_vllm_metrics(verdict.manifests, engine.workload):
            expected = True
    return expected


def test_validate_refuses_what_the_real_judges_refuse(
    kube_cluster: Path, make_namespace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vllm = _engine_venv()
    if not vllm and os.environ.get("CI"):
        pytest.fail("the engine venv is missing under CI: the vLLM judge must run (toolchain/engine.sh)")
    assert render.ensure_dependencies() == ""
    api = config.new_client_from_config(config_file=str(kube_cluster))
    helm3 = toolchain.helm(3, allow_override=False)
    # validate's judge installs the operators' CRDs (KEDA, Prometheus, HyperPod) on the test cluster, so
    # both sides see them served.
    judge = server.local_judge(Rest.from_kubeconfig(kube_cluster), VALIDATE_NS, {}, "the test cluster")
    apiserver = judges.ApiServer(api, make_namespace("oracle", enforce="privileged"), tmp_path)

    environments = {p.name: yaml.safe_load(p.read_text()) for p in sorted(paths.VALUES.glob("*.yaml"))}
    base_renders = [
        judges.helm_render(helm3, paths.VALUES / n, apiserver.namespace)[0] or [] for n in environments
    ]
    pools = values_mutations.build_pools(
        list(environments.values()),
        values_mutations.load_schema(judges.CHART),
        values_mutations.flag_pool([f for r in base_renders for f in values_mutations.rendered_flags(r)]),
    )
    rng = random.Random(SEED)
    files, mutations = [], {}
    for i in range(FILES):
        source = rng.choice(sorted(environments))
        values, done = values_mutations.mutate(rng, environments[source], pools)
        path = tmp_path / f"{i:04d}-{source}"
        path.write_text(yaml.safe_dump(values, sort_keys=False))
        files.append(path)
        mutations[path] = done

    with ThreadPoolExecutor(max_workers=4) as pool:
        verdicts = list(pool.map(lambda p: _oracle(helm3, apiserver, p), files))
    if vllm:
        # most engines carry one mutation at most: a judge that refuses most of them is itself broken
        assert _add_vllm(verdicts) > 0.5, "vLLM's probe refused most engines: " + str(verdicts[0].refusals)
    # One run in the default mode; its offline verdict is the same report without the API server's row
    # (every other layer runs alike in both modes).
    default = pipeline.validate(files, dataclasses.replace(OPTIONS, server=True), judge=judge)

    refused = [i for i, v in enumerate(verdicts) if v.refused]
    missed: dict[str, collections.Counter[str]] = {
        "default": collections.Counter(),
        "offline": collections.Counter(),
    }
    per_category: collections.Counter[str] = collections.Counter()
    unexplained, unnamed, over_schema = [], [], []
    for i in refused:
        categories = {category for _, category, _ in verdicts[i].refusals}
        per_category.update(categories)
        for mode in ("default", "offline"):
            if not _errors(default[i], offline=mode == "offline"):
                missed[mode].update(categories)
                if mode == "default" and not categories <= set(EXPECTED_MISSES):
                    unexplained.append(i)
            elif mode == "default" and not any(f.path or f.line for f in _errors(default[i])):
                unnamed.append(i)
    for i, report in enumerate(default):
        if any(f.rule.startswith("schema.") for f in _errors(report)) and not any(
            judge == "Helm" for judge, _, _ in verdicts[i].refusals
        ):
            over_schema.append(i)
    only_validate = collections.Counter(
        f.rule for i, report in enumerate(default) if not verdicts[i].refused for f in _errors(report)
    )
    drawn = collections.Counter(
        name for path in files for done in mutations[path] for key, name in DRAWN.items() if key in done
    )
    over_scheduler = [i for i, report in enumerate(default) if _scheduler_over_refusal(verdicts[i], report)]
    metrics_wrong = []
    for i, report in enumerate(default):
        expected = _metrics_expected(verdicts[i]) if vllm and verdicts[i].manifests else None
        if expected is not None and expected != any(f.rule == METRICS_RULE for f in report.findings):
            metrics_wrong.append(i)
    schedulers = [e["scheduler"] for v in verdicts for e in v.engine_extras]
    judged = collections.Counter(
        "not judged" if s is None else "split by GPU" if s["split"] else "accepted" if s["ok"] else "refused"
        for s in schedulers
    )

    with capsys.disabled():
        misses = {mode: sum(1 for i in refused if not _errors(default[i], mode == "o")) for mode in "do"}
        print(
            f"\n{FILES} generated files (seed {SEED}, vLLM judge {'on' if vllm else 'off'}): the real judges "
            f"refused {len(refused)}; kvtier validate missed {misses['d']} in its default mode, "
            f"{misses['o']} offline"
        )
        print("  category of the judges' refusal: files / missed by default / missed offline")
        for category, count in per_category.most_common():
            why = f" (may be missed: {EXPECTED_MISSES[category]})" if category in EXPECTED_MISSES else ""
            counts = f"{count:5d} {missed['default'][category]:5d} {missed['offline'][category]:5d}"
            print(f"  {counts}  {category}{why}")
        print(
            f"  drawn by their own mutations (files): {dict(drawn)}; "
            f"vLLM's SchedulerConfig on the engines: {dict(judged)}"
        )
        print("  refused by validate alone (no judge here refused the file), by rule:")
        for rule, count in only_validate.most_common(25):
            print(f"  {count:5d}  {rule}")

    def show(i: int) -> str:
        return (
            f"{files[i].name}: {mutations[files[i]]}\n  judges: {verdicts[i].refusals}\n"
            f"  validate: {[(f.rule, f.path, f.message[:120]) for f in _errors(default[i])]}"
        )

    assert len(refused) > FILES // 10 and len(refused) < FILES, "the generator tests too little"
    assert not unexplained, f"{len(unexplained)} missed, e.g.\n" + "\n".join(show(i) for i in unexplained[:8])
    assert not unnamed, "refused without a values key:\n" + "\n".join(show(i) for i in unnamed[:5])
    assert not over_schema, "schema refusal Helm does not make:\n" + "\n".join(
        show(i) for i in over_schema[:5]
    )
    assert FILES < 60 or len(drawn) == len(DRAWN), f"a category is not drawn: {dict(drawn)}"
    assert not over_scheduler, f"{SCHEDULER_RULE} where vLLM's SchedulerConfig accepts:\n" + "\n".join(
        show(i) for i in over_scheduler[:5]
    )
    assert not metrics_wrong, (
        f"{METRICS_RULE} not as the chart's queries and vLLM's parser say:\n"
        + "\n".join(show(i) for i in metrics_wrong[:5])
    )


# -- the model-shape rules on each source of a model's facts ------------------------------------------------

FACT_DRAWS = int(os.environ.get("KVTIER_JUDGE_FACTS", "24"))
SHAPE_PROBE = Path(engine_probes.__file__).with_name("model_shape_probe.py")
GOOD = Path(__file__).parents[1] / "fixtures" / "values" / "good-minimal.yaml"
CONTEXT_RULE, HEADS_RULE, SOURCE_RULE = "max-model-len-within-model", "tp-divides-heads", "model-facts-source"


def _shape_findings(d: facts_sources.Draw, given: dict[str, Path]) -> list[Any]:
    values = yaml.safe_load(GOOD.read_text())
    values["models"][0].update(d.model())
    values["models"][0]["source"]["huggingface"]["revision"] = d.revision
    loaded = loader.load_text(yaml.safe_dump(values, sort_keys=False), Path(f"{d.name}.yaml"))
    ctx = ValuesContext(loaded.data, loaded, origins=Origins([loaded]), model_configs=given)
    return catalogue.run_values(ctx, only=[CONTEXT_RULE, HEADS_RULE, SOURCE_RULE])


def _shape_disagreements(d: facts_sources.Draw, verdict: dict[str, Any], found: list[Any]) -> list[str]:
    errors = {f.rule for f in found if f.severity == "error"}
    sourced = any(f.rule == SOURCE_RULE for f in found)
    wrong = []
    if sourced != (d.source in ("shipped", "unknown")):
        wrong.append(f"{SOURCE_RULE} {'said' if sourced else 'not said'} for a model from {d.source}")
    if d.source == "unknown":  # no facts: the shape rules pass it (and the line above says so)
        return wrong + [f"{rule} without facts" for rule in errors - {SOURCE_RULE}]
    if not verdict["read"]:
        return wrong  # vLLM cannot read the config here: no verdict to compare
    if (CONTEXT_RULE in errors) == verdict["context"]["ok"]:
        wrong.append(f"{CONTEXT_RULE}: validate {sorted(errors)}, vLLM {verdict['context']}")
    heads = int(d.config["num_attention_heads"])
    # ModelConfig checks the attention heads; the KV heads' split is each model class's check, at load
    if heads % d.tensor_parallel and (HEADS_RULE in errors) == verdict["heads"]["ok"]:
        wrong.append(f"{HEADS_RULE}: validate {sorted(errors)}, vLLM {verdict['heads']}")
    if not heads % d.tensor_parallel and not verdict["heads"]["ok"]:
        wrong.append(f"vLLM refuses heads {heads} over {d.tensor_parallel}: {verdict['heads']}")
    return wrong


def test_model_shape_rules_match_vllm_on_every_facts_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """validate's context-length and heads rules, with the model's config.json from the stand-in Hub, the
    shipped facts, `--model-config`, or nowhere (offline), against vLLM's ModelConfig fed that config."""
    if not _engine_venv():
        if os.environ.get("CI"):
            pytest.fail("the engine venv is missing under CI: the vLLM judge must run (toolchain/engine.sh)")
        pytest.skip("the engine venv is not built: vLLM's ModelConfig is the judge")
    draws = facts_sources.draw(random.Random(SEED), FACT_DRAWS)
    request = tmp_path / "shapes.json"
    cases = [
        {"config": d.config, "max_model_len": d.max_model_len, "tensor_parallel_size": d.tensor_parallel}
        for d in draws
    ]
    request.write_text(json.dumps({"cases": cases}))
    proc = subprocess.run(
        [str(rig.engine_python()), str(SHAPE_PROBE), str(request)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdicts = json.loads(proc.stdout.strip().splitlines()[-1])["cases"]

    cache = hub_stand_in.own_hub_cache(tmp_path, monkeypatch)
    given = {}
    for d in draws:
        if d.source == "given":
            path = tmp_path / "given" / d.name / "config.json"
            path.parent.mkdir(parents=True)
            path.write_text(json.dumps(d.config))
            given[d.name] = path
    hub = hub_stand_in.StandInHub()
    for d in draws:
        if d.source == "hub":
            hub.add(d.name, d.config, revisions={"pinned": d.revision})
    hub.start()
    try:
        hub_stand_in.go_online(monkeypatch, hub, cache)
        found = {i: _shape_findings(d, given) for i, d in enumerate(draws) if d.source == "hub"}
        hub_stand_in.go_offline(monkeypatch)
        found |= {i: _shape_findings(d, given) for i, d in enumerate(draws) if d.source != "hub"}
    finally:
        hub.stop()

    wrong = {i: _shape_disagreements(d, verdicts[i], found[i]) for i, d in enumerate(draws)}
    refused = collections.Counter(
        (d.source, rule)
        for i, d in enumerate(draws)
        for rule in ("context", "heads")
        if verdicts[i]["read"] and not verdicts[i][rule]["ok"]
    )
    with capsys.disabled():
        print(f"\n{len(draws)} model draws (seed {SEED}): vLLM refused, by source and check: {dict(refused)}")
    bad = [
        f"{d.source} {d.name} tp={d.tensor_parallel} len={d.max_model_len}: {wrong[i]}"
        for i, d in enumerate(draws)
        if wrong[i]
    ]
    assert not bad, "\n".join(bad[:8])
