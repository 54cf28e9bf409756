"""The charts' own refusals as rules: every template `fail` in both charts starts with `[rule-id] key.path: `,
the id is in validate's catalogue, and `kvtier validate` reports each refusal under that id at the line of
the user's file that holds the key (Helm's real refusal, rendered by the pinned Helm 3)."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvtier import paths
from kvtier.cli import main
from kvtier.validate import catalogue

FIXTURES = Path(__file__).parents[1] / "fixtures" / "values"
STANDALONE = FIXTURES / "good-minimal.yaml"
HYPERPOD = paths.VALUES / "hyperpod-g6e-4xlarge.yaml"
DELETE = object()  # an overlay value that removes the key from the base file

# A template `fail` or `required` (Helm's refusal too) and the start of its message (a string literal, or
# printf's format).
_FAIL = re.compile(r'\b(?:fail|required)\s+(?:\(\s*printf\s+)?"((?:[^"\\]|\\.)*)"')
_TAG = re.compile(r"\[([a-z0-9][a-z0-9-]*)\] ([^\s:]+): ")

NATIVE = {
    "cache": {"backend": "vllm-native", "hashAlgorithm": "sha256", "l2": {"eviction": {"recordHits": False}}}
}
AUTOSCALING = {"engine": {"autoscaling": {"enabled": True, "assumeApiServed": True}}}
PROMETHEUS = "http://prometheus-operated.monitoring:9090"
STATIC = {"url": "http://10.0.0.1:8000"}

# rule id -> (base file, overlay, the key path validate must report, words of the chart's message)
CASES: dict[str, tuple[Path, dict[str, Any], str, str]] = {
    "backend-target": (HYPERPOD, NATIVE, "cache.backend", "renders LMCache's connector only"),
    "backend-l2-needs-l1": (
        STANDALONE,
        {**NATIVE, "cache": {**NATIVE["cache"], "l1": {"enabled": False}}},
        "cache.l1.enabled",
        "moves every chunk through the CPU tier",
    ),
    "backend-record-hits": (
        STANDALONE,
        {"cache": {**NATIVE["cache"], "l2": {"eviction": {"recordHits": True}}}},
        "cache.l2.eviction.recordHits",
        "the hit recorder is an LMCache storage plugin",
    ),
    "backend-hash-algorithm": (
        STANDALONE,
        {"cache": {"hashAlgorithm": "xxhash"}},
        "cache.hashAlgorithm",
        "xxhash is vLLM's",
    ),
    "l2-writable-by-engines": (
        STANDALONE,
        {
            "engine": {"podSecurityContext": {"runAsUser": 2000, "runAsGroup": 2000, "fsGroup": 2000}},
            "curvine": {"csi": {"volumeAccess": {"uid": 1000, "gid": 1000, "mode": "group"}}},
        },
        "curvine.csi.volumeAccess",
        "cannot write the L2",
    ),
    "router-static-workers": (
        STANDALONE,
        {"router": {"discovery": {"mode": "static", "staticWorkers": {"other": [STATIC]}}}},
        "router.discovery.staticWorkers",
        'no entry for model "qwen2-7b"',
    ),
    "router-static-kv-events": (
        STANDALONE,
        {
            "routing": {"strategy": "kvaware"},
            "router": {"discovery": {"mode": "static", "staticWorkers": {"qwen2-7b": [STATIC]}}},
        },
        "router.discovery.staticWorkers",
        "needs kvEvents",
    ),
    "warmup-target": (
        HYPERPOD,
        {"cache": {"warmup": {"prefixes": {"qwen2-7b": {"system": {"text": "You answer briefly."}}}}}},
        "cache.warmup.prefixes",
        "on hyperpod the operator renders them",
    ),
    "warmup-model": (
        STANDALONE,
        {"cache": {"warmup": {"prefixes": {"nosuch": {"system": {"text": "You answer briefly."}}}}}},
        "cache.warmup.prefixes.nosuch",
        'no models[] entry is named "nosuch"',
    ),
    "hyperpod-patch-api": (
        HYPERPOD,
        {"hyperpod": {"patch": {"apiVersion": DELETE}}},
        "hyperpod.patch.mechanism",
        "serves no MutatingAdmissionPolicy API",
    ),
    "hyperpod-multiprocess-patch": (
        HYPERPOD,
        {"hyperpod": {"lmcache": {"mode": "MultiProcess"}, "patch": {"mechanism": "kyverno"}}},
        "hyperpod.patch.mechanism",
        "the Kyverno alternative covers InProcess only",
    ),
    "hyperpod-operator-supports": (
        HYPERPOD,
        {"hyperpod": {"operator": {"version": "3.6"}, "lmcache": {"mode": "MultiProcess"}}},
        "hyperpod.lmcache.mode",
        "needs operator >= 3.7",
    ),
    "hyperpod-api-key": (
        HYPERPOD,
        {"auth": {"apiKeySecret": {"name": "api-key", "key": "key"}}},
        "auth.apiKeySecret",
        "the operator renders the engine pods",
    ),
    "hyperpod-tenant-isolation": (
        HYPERPOD,
        {"cache": {"tenantIsolation": True}},
        "cache.tenantIsolation",
        "keys L1/L2 chunks on tokens alone",
    ),
    "hyperpod-multiprocess-lmcache": (
        HYPERPOD,
        {"hyperpod": {"lmcache": {"mode": "MultiProcess"}, "worker": {"image": {"tag": "v0.4.0"}}}},
        "hyperpod.worker.image.tag",
        "needs LMCache >= 0.5.0",
    ),
    "hyperpod-revision-sha": (
        HYPERPOD,
        {"models": {0: {"source": {"huggingface": {"revision": "main"}}}}},
        "models[0].source.huggingface.revision",
        "a full 40-character commit SHA",
    ),
    "hyperpod-instance-type": (
        HYPERPOD,
        {"models": {0: {"instanceType": ""}}},
        "models[0].instanceType",
        "needs the HyperPod instance type",
    ),
    "model-source-target": (
        STANDALONE,
        {
            "models": {
                0: {"source": {"huggingface": DELETE, "s3": {"bucket": "models", "region": "us-east-1"}}}
            }
        },
        "models[0].source",
        "target standalone needs source.huggingface or source.pvc",
    ),
    "engine-args-reserved": (
        STANDALONE,
        {"models": {0: {"extraArgs": ["--max_model_len=1024"]}}},
        "models[0].extraArgs",
        "--max-model-len is set by the chart",
    ),
    "cpu-engine-one-rank": (
        STANDALONE,
        {"engine": {"accelerator": "cpu"}, "models": {0: {"gpusPerReplica": 2}}},
        "models[0].gpusPerReplica",
        "engine.accelerator is cpu",
    ),
    "gpu-resource-from-tp": (
        STANDALONE,
        {"models": {0: {"resources": {"limits": {"nvidia.com/gpu": 2}, "requests": {"nvidia.com/gpu": 2}}}}},
        "models[0].resources.requests",
        "but gpusPerReplica (= tensor parallel size) is 1",
    ),
    "l1-auto-needs-memory-limit": (
        STANDALONE,
        {"cache": {"l1": {"size": "auto"}}, "models": {0: {"resources": {"limits": {"memory": DELETE}}}}},
        "models[0].resources.limits",
        "needs resources.limits.memory on the model",
    ),
    "l1-fits-memory": (
        STANDALONE,
        {"cache": {"l1": {"size": "auto"}}, "models": {0: {"resources": {"limits": {"memory": "8Gi"}}}}},
        "models[0].resources.limits.memory",
        "cache.l1.size auto leaves",
    ),
    "engine-env-reserved": (
        STANDALONE,
        {"engine": {"extraEnv": [{"name": "PYTHONHASHSEED", "value": "1"}]}},
        "engine.extraEnv",
        "PYTHONHASHSEED is set by the chart",
    ),
    "image-reference": (
        STANDALONE,
        {"router": {"image": {"tag": None}}},
        "router.image.tag",
        "needs a tag or a digest",
    ),
    "api-served": (
        STANDALONE,
        {"metrics": {"prometheusRule": {"enabled": True}}},
        "metrics.prometheusRule.enabled",
        "the cluster does not serve monitoring.coreos.com/v1/PrometheusRule",
    ),
    "prometheusrule-eviction-period": (
        STANDALONE,
        {
            "metrics": {"prometheusRule": {"enabled": True, "assumeApiServed": True}},
            "cache": {"l2": {"eviction": {"schedule": "0 1,7 * * *"}}},
        },
        "metrics.prometheusRule.evictionPeriod",
        "has no single period the alerts can read",
    ),
    "autoscaling-target": (HYPERPOD, AUTOSCALING, "engine.autoscaling", "belong to the HyperPod operator"),
    "autoscaling-fixed-replicas": (
        STANDALONE,
        {**AUTOSCALING, "routing": {"strategy": "kvaware"}},
        "engine.autoscaling",
        "routing.strategy kvaware with Kubernetes discovery",
    ),
    "autoscaling-prometheus-address": (
        STANDALONE,
        AUTOSCALING,
        "engine.autoscaling.prometheusAddress",
        "the Prometheus URL KEDA queries is required",
    ),
    "replica-range": (
        STANDALONE,
        {
            "engine": {
                "autoscaling": {
                    **AUTOSCALING["engine"]["autoscaling"],
                    "prometheusAddress": PROMETHEUS,
                    "minReplicas": 5,
                    "maxReplicas": 4,
                }
            }
        },
        "engine.autoscaling",
        "minReplicas 5 is above maxReplicas 4",
    ),
    "router-serves-engines": (
        STANDALONE,
        {"router": {"hpa": {"enabled": True, "minReplicas": 5, "maxReplicas": 2}}},
        "router.hpa",
        "minReplicas 5 is above maxReplicas 2",
    ),
    "l2-backend": (
        STANDALONE,
        {"curvine": {"enabled": False}},
        "cache.l2.claim",
        "curvine.enabled is false",
    ),
    "curvine-masters-odd": (
        STANDALONE,
        {"curvine": {"master": {"replicas": 4}}},
        "curvine.master.replicas",
        "4:",
    ),
    "curvine-read-chunk-cap": (
        STANDALONE,
        {"curvine": {"config": {"read": {"chunkSize": "4MB", "chunkNum": 8}}}},
        "curvine.config.read",
        "chunkSize 4MB x chunkNum 8 is 33554432 bytes",
    ),
    "networkpolicy-node-cidrs": (
        STANDALONE,
        {"curvine": {"worker": {"hostNetwork": True}, "networkPolicy": {"enabled": True, "nodeCIDRs": []}}},
        "curvine.networkPolicy.nodeCIDRs",
        "worker.hostNetwork is true",
    ),
    "curvine-csi-controller-identity": (
        STANDALONE,
        {"curvine": {"csi": {"controller": {"podSecurityContext": {"runAsUser": 5}}}}},
        "curvine.csi.controller.podSecurityContext.runAsUser",
        "the CSI controller runs as csi.volumeAccess.uid/gid",
    ),
    "curvine-data-dirs-unique": (
        STANDALONE,
        {
            "curvine": {
                "worker": {
                    "dataDirs": [
                        {"path": "/mnt/a", "type": "SSD", "capacity": "100GB"},
                        {"path": "/mnt/a", "type": "SSD", "capacity": "100GB"},
                    ]
                }
            }
        },
        "curvine.worker.dataDirs",
        "path /mnt/a is listed twice",
    ),
}
# Chart rules no values can reach: the schema refuses their input before any template runs. Each is held to
# that claim below (the schema must refuse the value), so a loosened schema brings the rule back here.
SCHEMA_FIRST: dict[str, tuple[dict[str, Any], str]] = {
    "quantity-format": ({"engine": {"shmSize": "16 gigabytes"}}, "engine.shmSize"),
    "routing-strategy": ({"routing": {"strategy": "leastload"}}, "routing.strategy"),
}


def _fails() -> list[tuple[Path, int, str]]:
    out = []
    for chart in ("kv-tiered-inference", "curvine"):
        for path in sorted((paths.CHARTS / chart / "templates").rglob("*.*")):
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                out += [(path, number, m.group(1)) for m in _FAIL.finditer(line)]
    return out


def test_every_template_fail_names_a_catalogued_rule_and_a_values_key() -> None:
    fails = _fails()
    assert len(fails) >= 40, "the scan found too few fails: is the pattern still right?"
    rules = catalogue.all_rules()
    for path, line, message in fails:
        where = f"{path.relative_to(paths.ROOT)}:{line}"
        tag = _TAG.match(message)
        assert tag, f"{where}: a fail must start with `[rule-id] key.path: `: {message[:80]}"
        rule_id, key = tag.groups()
        assert rule_id in rules, f"{where}: rule {rule_id} is not in validate's catalogue (chart_rules.py)"
        assert rules[rule_id].scope in ("chart", "values"), (
            f"{where}: {rule_id} is a {rules[rule_id].scope} rule"
        )
        top = re.split(r"[.\[]", key)[0]
        chart = path.relative_to(paths.CHARTS).parts[0]
        chart_values = yaml.safe_load((paths.CHARTS / chart / "values.yaml").read_text())
        assert top.startswith("%") or top in chart_values, (
            f"{where}: {key} is not a key of the chart's values"
        )


def test_every_chart_rule_is_a_fail_of_a_chart() -> None:
    used = {_TAG.match(message).group(1) for _, _, message in _fails() if _TAG.match(message)}
    declared = {r.id for r in catalogue.all_rules().values() if r.scope == "chart"}
    assert declared <= used, f"declared but no template fails with them: {sorted(declared - used)}"


def test_every_chart_rule_has_a_case() -> None:
    used = {_TAG.match(message).group(1) for _, _, message in _fails() if _TAG.match(message)}
    assert set(CASES) | set(SCHEMA_FIRST) == used


def _merge(base: Any, overlay: Any) -> Any:
    if overlay is DELETE:
        return DELETE
    if isinstance(overlay, dict) and isinstance(base, list):  # {index: overlay}: change one list item
        items = copy.deepcopy(base)
        for index, change in overlay.items():
            items[index] = _merge(items[index], change)
        return items
    if isinstance(overlay, dict) and isinstance(base, dict):
        out = copy.deepcopy(base)
        for key, value in overlay.items():
            merged = _merge(out.get(key), value)
            if merged is DELETE:
                out.pop(key, None)
            else:
                out[key] = merged
        return out
    return copy.deepcopy(overlay)


def _write(tmp_path: Path, name: str, base: Path, overlay: dict[str, Any]) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(_merge(yaml.safe_load(base.read_text()), overlay), sort_keys=False))
    return path


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """One `kvtier validate` (Helm 3) over every case and schema-first file: report by rule id."""
    if not (paths.TOOLS_BIN / "helm3").exists():
        pytest.fail("pinned Helm not built: run `make tools`")
    tmp = tmp_path_factory.mktemp("chart-rules")
    files = {rule_id: _write(tmp, rule_id, base, overlay) for rule_id, (base, overlay, _, _) in CASES.items()}
    files |= {
        rule_id: _write(tmp, rule_id, STANDALONE, overlay) for rule_id, (overlay, _) in SCHEMA_FIRST.items()
    }
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["validate", "--output", "json", "--helm", "3", *map(str, files.values())])
    by_file = {env["file"]: env for env in json.loads(out.getvalue())["environments"]}
    return {rule_id: by_file[str(path)] for rule_id, path in files.items()}


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_validate_reports_the_refusal_under_its_rule_at_the_users_line(
    rule_id: str, reports: dict[str, dict[str, Any]]
) -> None:
    _, _, key, words = CASES[rule_id]
    report = reports[rule_id]
    refusals = [f for f in report["findings"] if f["check"] == "render helm3"]
    assert refusals, f"Helm rendered the case: {[f.get('message') for f in report['findings']]}"
    refusal = refusals[0]
    assert refusal.get("rule") == rule_id, refusal
    assert words in refusal.get("message", ""), refusal.get("message", "")
    assert refusal.get("path") == key, refusal
    assert refusal.get("reason") == catalogue.all_rules()[rule_id].reason
    assert refusal.get("line"), refusal
    if (
        refusal["file"] != report["file"]
    ):  # a chart default the user did not write: its note names the user's key
        assert report["file"] in refusal["message"], refusal["message"]
        return
    written = Path(report["file"]).read_text().splitlines()[refusal["line"] - 1]
    last = re.split(r"[.\[]", key)[-1].rstrip("]")
    assert f"{last}:" in written or last.isdigit(), f"line {refusal['line']} is `{written}`, not {key}"
