"""`kvtier validate` against the real judges of a deployment, on generated values files.

Values files are generated from the environments in values/ (seeded random mutations of the keys that
real deployments get wrong: resources and quantities, shutdown timing, cron schedules, watermarks, ports,
replicas and HPA bounds, names, labels and annotations, node selectors and tolerations, engine flags, the
cache backend with its chunk size and hash),
kept when they pass the schema, rendered, and judged by the real API server (server-side dry run on the
test cluster) and, where the engine venv exists, by the pinned vLLM's own argument checks. Property: a file
a real judge refuses is refused by `kvtier validate` with every layer (misses must be 0), and the offline
layers alone (no server, no vLLM) are measured against the same verdicts: the miss rate a user without a
cluster sees is printed, with what only the server could judge.

KVTIER_JUDGE_FILES (default 520) sets how many schema-valid files are judged, KVTIER_JUDGE_SEED the seed.
"""

from __future__ import annotations

import collections
import copy
import os
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvtier import paths
from kvtier.cluster.common.rest import Rest
from kvtier.engine_rig import rig
from kvtier.engine_rig.errors import RigError
from kvtier.validate import pipeline
from kvtier.validate.findings import SERVER, VLLM
from kvtier.validate.layers import server

FILES = int(os.environ.get("KVTIER_JUDGE_FILES", "520"))
SEED = int(os.environ.get("KVTIER_JUDGE_SEED", "20261201"))
SOURCES = ("cpu.yaml", "prod-g6e-4xlarge.yaml", "staging.yaml", "hyperpod-g6e-4xlarge.yaml")
JUDGES = (SERVER, VLLM)

CPU = ["100m", "250m", "0.5", "1", "2", "1500m", "4", "8", "12"]
MEMORY = [
    "64Mi",
    "256Mi",
    "512M",
    "1Gi",
    "2e9",
    "1.5Gi",
    "4Gi",
    "6Gi",
    "8Gi",
    "16Gi",
    "96Gi",
    "110Gi",
    "200Gi",
]
CRON_TOKENS = [
    "*",
    "?",
    "0",
    "5",
    "7",
    "12",
    "23",
    "31",
    "59",
    "60",
    "*/5",
    "*/0",
    "1-5",
    "5-1",
    "mon",
    "JAN",
    "x",
]
DESCRIPTORS = ["@hourly", "@daily", "@weekly", "@every 10m", "@every ten", "@fortnightly"]
WATERMARKS = ["50%", "70%", "85%", "95%", "100%", "400Gi", "450Gi", "600Gi", "1Ti"]
PORTS = [8000, 8080, 29000, 5557, 9000]
LABEL_KEYS = ["team", "example.com/tier", "-bad", "a b", "x" * 64, "kvtier.io/ok"]
LABEL_VALUES = ["ml", "", "a.b-c_d", "-edge", "white space", "y" * 64, "ok-value"]
NAMES = ["qwen", "qwen2-7b", "a-model-name-that-is-forty-chars-long-xx", "m" * 50]
EXTRA_ARGS = [
    ["--max-num-seqs", "64"],
    ["--max-num-seqs", "0"],
    ["--kv-cache-dtype", "fp8"],
    ["--kv-cache-dtype", "bogus"],
    ["--no-such-flag"],
    ["--enforce-eager"],
    ["--block-size", "0"],
    ["--swap-space", "lots"],
]


def _containers(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The resources blocks a mutation may change (created where the file has none)."""
    out = []
    for i in range(len(values.get("models") or [])):
        out.append(values["models"][i].setdefault("resources", {}))
    out.append(values.setdefault("router", {}).setdefault("resources", {}))
    out.append(values.setdefault("tests", {}).setdefault("resources", {}))
    out.append(
        values.setdefault("cache", {})
        .setdefault("l2", {})
        .setdefault("eviction", {})
        .setdefault("resources", {})
    )
    return out


def _resources(rng: random.Random, values: dict[str, Any]) -> None:
    block = rng.choice(_containers(values))
    for kind in rng.sample(["requests", "limits"], rng.randint(1, 2)):
        name = rng.choice(["cpu", "memory"])
        block.setdefault(kind, {})[name] = rng.choice(CPU if name == "cpu" else MEMORY)


def _shutdown(rng: random.Random, values: dict[str, Any]) -> None:
    engine = values.setdefault("engine", {})
    engine["preStopSleepSeconds"] = rng.choice([0, 5, 10, 60, 120, 200])
    engine["terminationGracePeriodSeconds"] = rng.choice([5, 30, 60, 120, 150])


def _schedule(rng: random.Random, values: dict[str, Any]) -> None:
    eviction = values.setdefault("cache", {}).setdefault("l2", {}).setdefault("eviction", {})
    if rng.random() < 0.2:
        eviction["schedule"] = rng.choice(DESCRIPTORS)
    else:
        eviction["schedule"] = " ".join(rng.choice(CRON_TOKENS) for _ in range(rng.choice([4, 5, 5, 5, 6])))


def _watermarks(rng: random.Random, values: dict[str, Any]) -> None:
    eviction = values.setdefault("cache", {}).setdefault("l2", {}).setdefault("eviction", {})
    eviction["highWatermark"], eviction["lowWatermark"] = rng.choice(WATERMARKS), rng.choice(WATERMARKS)


def _ports(rng: random.Random, values: dict[str, Any]) -> None:
    values.setdefault("engine", {})["port"] = rng.choice(PORTS)
    router = values.setdefault("router", {})
    router["port"], router["metricsPort"] = rng.choice(PORTS), rng.choice(PORTS)


def _replicas(rng: random.Random, values: dict[str, Any]) -> None:
    router = values.setdefault("router", {})
    router["replicas"] = rng.choice([0, 1, 2])
    if rng.random() < 0.5:
        router["hpa"] = {
            "enabled": True,
            "minReplicas": rng.choice([1, 2, 4]),
            "maxReplicas": rng.choice([1, 3, 6]),
        }
    for model in values.get("models") or []:
        model["replicas"] = rng.choice([0, 1, 2, 3])


def _names(rng: random.Random, values: dict[str, Any]) -> None:
    models = values.get("models") or []
    if models:
        models[0]["name"] = rng.choice(NAMES)
        if rng.random() < 0.4:
            models.append({**copy.deepcopy(models[0]), "name": rng.choice(NAMES)})


def _labels(rng: random.Random, values: dict[str, Any]) -> None:
    where = rng.choice(
        [
            ("commonLabels",),
            ("engine", "podLabels"),
            ("engine", "podAnnotations"),
            ("router", "podAnnotations"),
            ("metrics", "dashboard", "labels"),
        ]
    )
    node = values
    for key in where[:-1]:
        node = node.setdefault(key, {})
    node[where[-1]] = {rng.choice(LABEL_KEYS): rng.choice(LABEL_VALUES)}


def _scheduling(rng: random.Random, values: dict[str, Any]) -> None:
    models = values.get("models") or []
    if not models:
        return
    model = rng.choice(models)
    if rng.random() < 0.5:
        model["nodeSelector"] = {rng.choice(LABEL_KEYS): rng.choice(LABEL_VALUES)}
    else:
        toleration: dict[str, Any] = {
            "key": rng.choice(["gpu", "", "a b"]),
            "operator": rng.choice(["Exists", "Equal"]),
        }
        if rng.random() < 0.5:
            toleration["value"] = rng.choice(["x", ""])
        if rng.random() < 0.5:
            toleration["effect"] = rng.choice(["NoSchedule", "NoExecute", "PreferNoSchedule"])
        if rng.random() < 0.3:
            toleration["tolerationSeconds"] = rng.choice([-1, 0, 30])
        model["tolerations"] = [toleration]


def _cache(rng: random.Random, values: dict[str, Any]) -> None:
    """The backend, its chunk and its hash: vLLM's native offloading refuses a chunk its KV block size does
    not divide (the probe's kv-offloading stage), and each backend has its own hash names."""
    cache = values.setdefault("cache", {})
    cache["backend"] = rng.choice(["lmcache", "vllm-native"])
    cache["chunkSize"] = rng.choice([128, 200, 256, 512])
    cache["hashAlgorithm"] = rng.choice(["builtin", "sha256", "sha256_cbor", "xxhash"])
    cache.setdefault("l2", {}).setdefault("eviction", {})["recordHits"] = False


def _engine_args(rng: random.Random, values: dict[str, Any]) -> None:
    for model in values.get("models") or []:
        model["extraArgs"] = list(rng.choice(EXTRA_ARGS))


MUTATIONS = (
    _resources,
    _resources,
    _shutdown,
    _schedule,
    _watermarks,
    _ports,
    _replicas,
    _names,
    _labels,
    _scheduling,
    _engine_args,
    _cache,
)


def generate(rng: random.Random, base: dict[str, Any]) -> dict[str, Any]:
    values = copy.deepcopy(base)
    for mutation in rng.sample(MUTATIONS, rng.randint(1, 3)):
        mutation(rng, values)
    return values


def _engine_venv() -> bool:
    try:
        rig.engine_python()
    except RigError:
        return False
    return True


def _errors(report: pipeline.FileReport, checks: tuple[str, ...], inside: bool) -> list[Any]:
    return [f for f in report.findings if f.severity == "error" and (f.check in checks) == inside]


def _schema_failed(report: pipeline.FileReport) -> bool:
    return any(f.rule.startswith("schema.") for f in report.findings)


def test_validate_refuses_what_the_real_judges_refuse(
    kube_cluster: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(SEED)
    bases = {name: yaml.safe_load((paths.VALUES / name).read_text()) for name in SOURCES}
    vllm = _engine_venv()
    if not vllm and os.environ.get("CI"):
        pytest.fail("the engine venv is missing under CI: the vLLM judge must run (toolchain/engine.sh)")
    options = pipeline.Options(helm_majors=(3,), minors=("1.35",), namespace="judged", vllm=vllm)
    rest = Rest.from_kubeconfig(kube_cluster)
    judge = server.local_judge(rest, options.namespace, {}, "the test cluster")

    # One validate call for every file: the vLLM judge starts its interpreter once (about 40 s), not per
    # batch. Enough files for FILES of them to pass the schema (about 7 % fall outside it).
    files = []
    for i in range(FILES + FILES // 4):
        source = rng.choice(SOURCES)
        path = tmp_path / f"{i}-{source}"
        path.write_text(yaml.safe_dump(generate(rng, bases[source]), sort_keys=False))
        files.append(path)
    judged: list[tuple[str, pipeline.FileReport]] = []
    schema_refused = 0
    for path, report in zip(files, pipeline.validate(files, options, judge=judge), strict=True):
        if _schema_failed(report):
            schema_refused += 1  # outside the schema: not a case of this property
        elif len(judged) < FILES:
            judged.append((path.read_text(), report))

    refused = [(text, r) for text, r in judged if _errors(r, JUDGES, inside=True)]
    missed_all = [(text, r) for text, r in refused if pipeline.exit_code([r]) == 0]
    missed_no_server = [(t, r) for t, r in refused if not _errors(r, (SERVER,), inside=False)]
    missed_offline = [(text, r) for text, r in refused if not _errors(r, JUDGES, inside=False)]
    only_judges = collections.Counter(
        f"{f.check}: {f.rule} at {f.path or f.subject}"
        for _, r in missed_offline
        for f in _errors(r, JUDGES, inside=True)
    )

    def rate(missed: list[Any]) -> str:
        return f"{len(missed)} ({len(missed) / max(len(refused), 1):.1%})"

    with capsys.disabled():
        print(
            f"\njudged {len(judged)} generated files (seed {SEED}; {schema_refused} outside the schema "
            f"dropped; vLLM judge {'on' if vllm else 'off'}): the real judges refused {len(refused)}. "
            f"kvtier validate missed: with every layer {rate(missed_all)}, without the server layer "
            f"{rate(missed_no_server)}, offline (no server, no vLLM) {rate(missed_offline)}"
        )
        for cause, count in only_judges.most_common():
            print(f"  only a real judge saw: {count:4d} x {cause}")
    assert len(judged) >= FILES
    assert refused, "no generated file was refused by a real judge: the generator tests nothing"
    assert not missed_all, missed_all[0][0]
    for _, report in refused:
        for f in _errors(report, JUDGES, inside=True):
            assert f.path or f.subject, f  # every refusal names a values key or the manifest
