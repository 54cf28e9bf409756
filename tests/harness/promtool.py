"""The pinned promtool on the chart's rendered PrometheusRule and on the dashboard's queries.

`promtool check rules` parses every expression and annotation template; `promtool test rules` evaluates
the alerts over input series. The dashboard has no rule file of its own, so each of its queries becomes
a recording rule (Grafana's `$__rate_interval`-style variables replaced by a duration first), which puts
it through the same parser.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kvtier import toolchain

# Grafana's built-in interval variables, as a query sees them once Grafana has substituted them.
GRAFANA_INTERVALS = re.compile(r"\$\{?__(rate_interval|interval|range)\}?")
GRAFANA_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


@dataclass(frozen=True)
class Result:
    ok: bool
    output: str


def promtool() -> Path:
    return toolchain.pinned("promtool")


def _run(*args: str, cwd: Path | None = None) -> Result:
    done = subprocess.run(
        [str(promtool()), *args], capture_output=True, text=True, timeout=300, cwd=cwd, check=False
    )
    return Result(done.returncode == 0, (done.stdout + done.stderr).strip())


def rule_groups(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    """The rule file a Prometheus Operator would load: every PrometheusRule's groups."""
    groups = [g for doc in manifests if doc.get("kind") == "PrometheusRule" for g in doc["spec"]["groups"]]
    return {"groups": groups}


def without_annotations(rules: dict[str, Any]) -> dict[str, Any]:
    """The same rules, annotations dropped: rule unit tests then compare labels only (`check` still
    parses every annotation template)."""
    groups = []
    for group in rules["groups"]:
        stripped = [{k: v for k, v in rule.items() if k != "annotations"} for rule in group["rules"]]
        groups.append({**group, "rules": stripped})
    return {"groups": groups}


def write_rules(rules: dict[str, Any], path: Path) -> Path:
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    return path


def check_rules(path: Path) -> Result:
    return _run("check", "rules", str(path))


def test_rules(test_file: Path) -> Result:
    """`promtool test rules`; rule_files in the test file are relative to its folder."""
    return _run("test", "rules", test_file.name, cwd=test_file.parent)


def dashboard_queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, expr) of every Prometheus target of a Grafana dashboard, rows' panels included."""
    found: list[tuple[str, str]] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            for target in panel.get("targets") or []:
                if target.get("expr"):
                    found.append((str(panel.get("title", "")), str(target["expr"])))
            walk(panel.get("panels") or [])

    walk(dashboard.get("panels") or [])
    return found


def as_promql(expr: str, variables: dict[str, str] | None = None) -> str:
    """A dashboard query as Prometheus receives it: interval variables as 5m, others from `variables`."""
    expr = GRAFANA_INTERVALS.sub("5m", expr)
    values = variables or {}
    return GRAFANA_VARIABLE.sub(lambda m: values.get(m.group(1), m.group(0)), expr)


def dashboard_rules(dashboard: dict[str, Any], variables: dict[str, str] | None = None) -> dict[str, Any]:
    """One recording rule per dashboard query, named after its panel, for `promtool check rules`."""
    rules = []
    for index, (title, expr) in enumerate(dashboard_queries(dashboard)):
        slug = re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_") or "panel"
        rules.append({"record": f"dashboard:{slug}:{index}", "expr": as_promql(expr, variables)})
    return {"groups": [{"name": str(dashboard.get("uid", "dashboard")), "rules": rules}]}


def load_dashboard(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    """The dashboard JSON of the rendered dashboard ConfigMap."""
    for doc in manifests:
        if (
            doc.get("kind") == "ConfigMap"
            and (doc["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == "dashboard"
        ):
            (text,) = doc["data"].values()
            return json.loads(text)
    raise LookupError("no dashboard ConfigMap in the rendered chart")
