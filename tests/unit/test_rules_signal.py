"""engine-metrics-disabled (kvtier.validate.checks.signal_rules): --disable-log-stats on an engine whose
vllm:* metrics the chart's ScaledObject or PrometheusRule reads."""

from __future__ import annotations

from typing import Any

import pytest

from harness.manifests import run_rule, workload
from kvtier.validate import catalogue
from kvtier.validate.checks.signal_rules import stats_off
from kvtier.validate.findings import Finding

RULE = "engine-metrics-disabled"
ENGINE = "kv-engine-qwen"


def _engine(*extra: str, name: str = ENGINE) -> dict[str, Any]:
    c = {"name": "vllm", "command": ["vllm"], "args": ["serve", "Qwen/Qwen2-7B", "--port", "8000", *extra]}
    return workload({"containers": [c]}, name=name)


def _scaled(target: str = ENGINE, query: str = "sum(vllm:num_requests_running{})") -> dict[str, Any]:
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": target},
        "spec": {
            "scaleTargetRef": {"name": target},
            "triggers": [{"type": "prometheus", "metadata": {"query": query}}],
        },
    }


def _alerts(expr: str = "min_over_time(vllm:kv_cache_usage_perc{}[10m]) > 0.95") -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "kv"},
        "spec": {
            "groups": [
                {
                    "name": "g",
                    "rules": [{"alert": "Saturated", "expr": expr}, {"record": "x", "expr": "vllm:y"}],
                }
            ]
        },
    }


def _run(*manifests: dict[str, Any]) -> list[Finding]:
    return run_rule(RULE, *manifests)


def test_the_rule_is_registered_with_its_source() -> None:
    r = catalogue.all_rules()[RULE]
    assert r.scope == "manifests" and "async_llm.py" in r.reason and "loggers.py" in r.reason


@pytest.mark.parametrize("spelling", ["--disable-log-stats", "--disable_log_stats", "--disable-log-stat"])
def test_stats_off_under_a_scaledobject_is_an_error_naming_the_item(spelling: str) -> None:
    [f] = _run(_engine("--enable-prefix-caching", spelling), _scaled())
    assert f.severity == "error" and f.path == "spec.template.spec.containers[0].args[5]"
    assert f"ScaledObject/{ENGINE}" in f.message and spelling in f.message


def test_stats_off_under_alerts_is_an_error_naming_the_alerts() -> None:
    [f] = _run(_engine("--disable-log-stats"), _alerts())
    assert f.severity == "error" and "Saturated" in f.message and "ScaledObject" not in f.message


def test_nothing_reads_the_metrics_or_stats_stay_on() -> None:
    assert _run(_engine("--disable-log-stats")) == []
    assert (
        _run(_engine("--disable-log-stats"), _scaled(query="sum(up{job='x'})"), _alerts(expr="up == 0")) == []
    )
    assert _run(_engine(), _scaled(), _alerts()) == []
    # another workload's ScaledObject and no alerts: this engine's metrics feed nothing
    assert _run(_engine("--disable-log-stats"), _scaled(target="other")) == []


def test_a_non_engine_container_is_left_alone() -> None:
    router = _engine("--disable-log-stats")
    router["spec"]["template"]["spec"]["containers"][0]["command"] = ["vllm-router"]
    router["spec"]["template"]["spec"]["containers"][0]["args"] = ["--disable-log-stats"]
    assert _run(router, _scaled()) == []


def test_stats_off_reads_the_argv_as_vllm_does() -> None:
    assert stats_off(["serve", "m", "--disable-log-stats"]) is not None
    assert stats_off(["serve", "m", "--disable-log-stats", "--port", "1"]) is not None
    assert stats_off(["serve", "m"]) is None and stats_off(None) is None
    assert (
        stats_off(["serve", "m", "--disable-log-stats=true"]) is not None
    )  # vLLM refuses; reported elsewhere
