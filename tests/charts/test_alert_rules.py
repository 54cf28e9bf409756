"""The umbrella's alerts and dashboard through the real promtool (built from Prometheus' Go module) and
Grafana's own dashboard models.

`promtool check rules` on the rendered PrometheusRule (every values/ environment with alerts on, Helm 3
and 4), `promtool test rules` on tests/charts/alerts/alerts_test.yaml (a firing and a quiet case per
alert), every dashboard query through the same parser, and every metric name they read belonging to an
exporter the project checks (kvtier.monitoring.names; the live scrape is tests/engine/test_metric_names.py).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from render import helm_bin, render_docs

from harness import grafana_schema, promtool
from kvtier import helm, paths, toolchain
from kvtier.monitoring import names

CHART = paths.CHARTS / "kv-tiered-inference"
UNIT_TESTS = Path(__file__).parent / "alerts" / "alerts_test.yaml"
ENVS = sorted(paths.VALUES.glob("*.yaml"))
# What alerts_test.yaml is written against (see its header).
UNIT_RENDER = {"release": "kvt", "namespace": "inference"}
ALERTS_ON = {"metrics.prometheusRule.enabled": True, "metrics.prometheusRule.assumeApiServed": True}


@pytest.fixture(autouse=True)
def tools(need) -> None:
    need(helm_bin(3).exists() and helm_bin(4).exists(), "pinned Helm 3 and 4 not built (make tools)")
    need((paths.TOOLS_BIN / "promtool").exists(), "promtool not built (make tools)")
    helm.build_dependencies(CHART)


def _rules(major: int = 3, values: list[Path] | None = None) -> dict[str, Any]:
    return promtool.rule_groups(render_docs(CHART, major=major, values=values or [], set_values=ALERTS_ON))


def _alerts(rules: dict[str, Any]) -> list[dict[str, Any]]:
    return [rule for group in rules["groups"] for rule in group["rules"] if "alert" in rule]


def _unit_test(tmp_path: Path, overrides: dict[str, Any] | None = None) -> promtool.Result:
    """Render with `overrides` (a values file: `--set` would turn 0.999 into a string), run the cases."""
    values = tmp_path / "overrides.yaml"
    values.write_text(yaml.safe_dump(overrides or {}))
    docs = render_docs(CHART, **UNIT_RENDER, values=[values], set_values=ALERTS_ON)
    promtool.write_rules(promtool.without_annotations(promtool.rule_groups(docs)), tmp_path / "rules.yaml")
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    return promtool.test_rules(tmp_path / UNIT_TESTS.name)


@pytest.mark.parametrize("major", [3, 4])
@pytest.mark.parametrize("env", [None, *ENVS], ids=lambda p: p.stem if p else "defaults")
def test_rendered_rules_pass_promtool_check(env: Path | None, major: int, tmp_path: Path) -> None:
    rules = _rules(major, [env] if env else [])
    assert _alerts(rules), "alerts on, yet no alert rendered"
    result = promtool.check_rules(promtool.write_rules(rules, tmp_path / "rules.yaml"))
    assert result.ok, result.output


def test_unit_tests_pass(tmp_path: Path) -> None:
    result = _unit_test(tmp_path)
    assert result.ok, result.output
    print(result.output)


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    docs = render_docs(CHART, **UNIT_RENDER, set_values=ALERTS_ON)
    rendered = {rule["alert"] for rule in _alerts(promtool.rule_groups(docs))}
    cases = yaml.safe_load(UNIT_TESTS.read_text())["tests"]
    firing, quiet = set(), set()
    for case in cases:
        for check in case.get("alert_rule_test") or []:
            (firing if check.get("exp_alerts") else quiet).add(check["alertname"])
    assert rendered - firing == set(), f"alerts without a firing case: {sorted(rendered - firing)}"
    assert rendered - quiet == set(), f"alerts without a quiet case: {sorted(rendered - quiet)}"
    assert (firing | quiet) - rendered == set(), "cases for alerts the chart does not render"


@pytest.mark.parametrize(
    "overrides",
    [
        {"metrics": {"prometheusRule": {"kvCacheUsage": 0.999}}},  # the saturated case stops firing
        {"metrics": {"prometheusRule": {"hitRatioBaseline": 0.7}}},  # a 60% day no longer counts
        {"cache": {"l2": {"eviction": {"highWatermark": "99%"}}}},  # 5e11 bytes is under the watermark
    ],
    ids=["kvCacheUsage", "hitRatioBaseline", "highWatermark"],
)
def test_a_changed_threshold_fails_the_unit_tests(overrides: dict[str, Any], tmp_path: Path) -> None:
    """The cases pin the thresholds: move one and promtool reports a mismatch."""
    result = _unit_test(tmp_path, overrides)
    assert not result.ok and "FAILED" in result.output, result.output


@pytest.mark.parametrize("env", [None, *ENVS], ids=lambda p: p.stem if p else "defaults")
def test_dashboard_queries_parse(env: Path | None, tmp_path: Path) -> None:
    docs = render_docs(CHART, values=[env] if env else [], set_values={"metrics.dashboard.enabled": True})
    dashboard = promtool.load_dashboard(docs)
    rules = promtool.dashboard_rules(dashboard)
    assert len(rules["groups"][0]["rules"]) >= 6, "the dashboard lost its panels"
    result = promtool.check_rules(promtool.write_rules(rules, tmp_path / "dashboard.yaml"))
    assert result.ok, result.output


@pytest.mark.parametrize("env", [None, *ENVS], ids=lambda p: p.stem if p else "defaults")
def test_every_metric_read_has_a_known_exporter(env: Path | None) -> None:
    values = [env] if env else []
    docs = render_docs(CHART, values=values, set_values={**ALERTS_ON, "metrics.dashboard.enabled": True})
    exprs = [rule["expr"] for rule in _alerts(promtool.rule_groups(docs))]
    exprs += [expr for _title, expr in promtool.dashboard_queries(promtool.load_dashboard(docs))]
    read = set().union(*(names.metric_names(expr) for expr in exprs))
    assert read, "no metric names found"
    assert names.unknown(read) == set(), f"metrics no checked exporter serves: {sorted(names.unknown(read))}"


def test_metric_name_extraction() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (le, pod) (rate(a:b_bucket{x="y{z}",w=~`q|r`}[5m] offset 1h)))'
        " / on (pod) group_left (node) c_total and d unless vector(3) > bool 1e3"
    )
    assert names.metric_names(expr) == {"a:b_bucket", "c_total", "d"}
    assert names.metric_names("time() - max(e)") == {"e"}


def test_kube_state_metrics_names_are_in_its_source(need) -> None:
    """kube-state-metrics' generators name each family in a string literal (internal/store/*.go) at the
    pinned version, fetched from the Go module proxy."""
    need(shutil.which("go") is not None, "Go is needed to fetch kube-state-metrics' module")
    from kvtier.upstream import go_module

    source = go_module.module_dir("k8s.io/kube-state-metrics/v2", "KUBE_STATE_METRICS_VERSION")
    text = "\n".join(p.read_text() for p in (source / "internal" / "store").glob("*.go"))
    wanted = names.by_exporter(names.KUBE_STATE_METRICS)
    assert wanted, "no kube-state-metrics names in the inventory"
    missing = {name for name in wanted if f'"{name}"' not in text}
    assert missing == set(), f"not in kube-state-metrics {toolchain.versions()['KUBE_STATE_METRICS_VERSION']}"


@pytest.mark.parametrize("env", [None, *ENVS], ids=lambda p: p.stem if p else "defaults")
def test_dashboard_is_made_of_grafana_fields(env: Path | None, need) -> None:
    """Round trip through Grafana's dashboard models: every key survives, and a misspelt one would not."""
    sdk = importlib.util.find_spec("grafana_foundation_sdk")
    need(sdk is not None, "grafana-foundation-sdk not installed (make tools)")
    docs = render_docs(CHART, values=[env] if env else [], set_values={"metrics.dashboard.enabled": True})
    dashboard = promtool.load_dashboard(docs)
    assert grafana_schema.dropped_keys(dashboard, grafana_schema.round_trip(dashboard)) == []
    misspelt = json.loads(json.dumps(dashboard))
    misspelt["panels"][0]["gridPoss"] = misspelt["panels"][0].pop("gridPos")
    lost = grafana_schema.dropped_keys(misspelt, grafana_schema.round_trip(misspelt))
    assert lost == ["/panels[0]/gridPoss"]
