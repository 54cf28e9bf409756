"""Which metric names the alerts and the dashboard read, and which real exporter serves each.

`metric_names(expr)` finds the series names in a PromQL expression (everything that is neither a function,
a keyword, a label, a string, a number nor a duration). `EXPORTER` says who serves each name the chart
uses; the tests check each group against the real thing: vLLM and vllm-router by scraping them on the
engine rig, kube-state-metrics in its source at the pinned version (its Go module), Curvine in its source
(cited below: no Curvine process runs in these tests).
"""

from __future__ import annotations

import re

VLLM = "vllm"
ROUTER = "vllm-router"
KUBE_STATE_METRICS = "kube-state-metrics"
CURVINE_MASTER = "curvine-master"
CURVINE_FUSE = "curvine-fuse"

EXPORTER: dict[str, str] = {
    # vLLM (engine pods' /metrics, the PodMonitor)
    "vllm:prefix_cache_hits_total": VLLM,
    "vllm:prefix_cache_queries_total": VLLM,
    "vllm:external_prefix_cache_hits_total": VLLM,
    "vllm:external_prefix_cache_queries_total": VLLM,
    "vllm:prompt_tokens_by_source_total": VLLM,
    "vllm:prompt_tokens_total": VLLM,
    "vllm:kv_cache_usage_perc": VLLM,
    "vllm:num_requests_waiting": VLLM,
    "vllm:num_requests_running": VLLM,
    "vllm:time_to_first_token_seconds_bucket": VLLM,
    # vllm-router (its --prometheus-port, the router ServiceMonitor)
    "vllm_router_active_workers": ROUTER,
    "vllm_router_worker_health": ROUTER,
    "vllm_router_policy_decisions_total": ROUTER,
    # kube-state-metrics (the eviction CronJob)
    "kube_cronjob_created": KUBE_STATE_METRICS,
    "kube_cronjob_spec_suspend": KUBE_STATE_METRICS,
    "kube_cronjob_status_last_schedule_time": KUBE_STATE_METRICS,
    "kube_cronjob_status_last_successful_time": KUBE_STATE_METRICS,
    # Curvine (its ServiceMonitor: master and, on each node, the FUSE client of the CSI node plugin).
    # Registered in Curvine v0.4.1's curvine-master/src/master/master_metrics.rs (MasterMetrics) and
    # crates/client/curvine-client-core/src/client_metrics.rs (ClientMetrics).
    "fs_used": CURVINE_MASTER,
    "capacity": CURVINE_MASTER,
    "worker_num": CURVINE_MASTER,
    "client_read_bytes": CURVINE_FUSE,
    "client_write_bytes": CURVINE_FUSE,
}

_STRING = re.compile(r"`[^`]*`|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'")
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"(?<![\w:.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?")
_KEYWORDS = {"and", "or", "unless", "offset", "bool", "by", "without", "on", "ignoring", "inf", "nan"}
_KEYWORDS |= {"group_left", "group_right", "atan2"}


def metric_names(expr: str) -> set[str]:
    """Series names an expression selects (metric names only; labels and functions are not names)."""
    text = _STRING.sub('""', expr)
    text = _GROUPING.sub(" ", text)
    text = _MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = re.sub(r"\b\d+(\.\d+)?(e[+-]?\d+)?\b", " ", text)
    names = set()
    for match in _IDENT.finditer(text):
        name, call = match.group(1), match.group(2)
        if not call and name.lower() not in _KEYWORDS:
            names.add(name)
    return names


def unknown(names: set[str]) -> set[str]:
    """Names no exporter in EXPORTER is known to serve."""
    return {n for n in names if n not in EXPORTER}


def by_exporter(exporter: str) -> set[str]:
    return {name for name, source in EXPORTER.items() if source == exporter}
