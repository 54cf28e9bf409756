"""Engine settings that silently turn off a signal the chart's autoscaler or alerts read.

vLLM (the pinned version, vllm/v1/engine/async_llm.py) builds its stat loggers, the Prometheus one among
them (vllm/v1/metrics/loggers.py StatLoggerManager, PrometheusStatLogger), only when log_stats is on, and
`--disable-log-stats` turns it off: every vllm:* series is then missing from /metrics while the server runs
and serves. The KEDA ScaledObject (templates/engine-scaledobject.yaml) and the PrometheusRule
(templates/prometheusrule.yaml) query vllm:* series by model_name, so an engine with the flag is never scaled
on load and none of its alerts can fire.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kvtier.manifests import at, container_paths, pod_templates, subject
from kvtier.upstream import vllm_args, vllm_options
from kvtier.validate.checks.crosspod import engines
from kvtier.validate.rules import Hit, ManifestsContext, rule

FLAG = "--disable-log-stats"
PREFIX = "vllm:"


def stats_off(args: Any) -> vllm_args.Setting | None:
    """The argv item that turns vLLM's stats (and so its Prometheus metrics) off, as vLLM reads the argv."""
    # every option of the pinned vLLM's: abbreviations (--disable-log-stat) resolve as in vLLM
    items = [str(a) for a in args] if isinstance(args, list) else []
    view = vllm_args.read(items, vllm_options.table().known)
    found = view.last(FLAG)
    return found if found is not None and found.value == "true" else None


def _readers(manifests: list[Any]) -> tuple[dict[str, list[str]], list[str]]:
    """(workload name -> the ScaledObjects that scale it on vllm:* series, the alerts on vllm:* series)."""
    scaled: dict[str, list[str]] = {}
    alerts: list[str] = []
    for m in manifests:
        if not isinstance(m, dict):
            continue
        if m.get("kind") == "ScaledObject":
            queries = [str(at(t, "metadata.query") or "") for t in at(m, "spec.triggers") or []]
            if any(PREFIX in q for q in queries):
                scaled.setdefault(str(at(m, "spec.scaleTargetRef.name")), []).append(subject(m))
        elif m.get("kind") == "PrometheusRule":
            for group in at(m, "spec.groups") or []:
                for r in group.get("rules") or [] if isinstance(group, dict) else []:
                    if isinstance(r, dict) and r.get("alert") and PREFIX in str(r.get("expr") or ""):
                        alerts.append(str(r["alert"]))
    return scaled, alerts


@rule(
    "engine-metrics-disabled",
    scope="manifests",
    reason="vLLM serves its vllm:* Prometheus metrics only while stats are on: --disable-log-stats skips its "
    "stat loggers, the Prometheus one included (vllm/v1/engine/async_llm.py, vllm/v1/metrics/loggers.py), so "
    "the chart's KEDA ScaledObject finds no in-flight requests to scale on and its vllm:* alerts never fire "
    "for that model",
    remedy="drop --disable-log-stats from the model's extraArgs (the periodic stats log line costs little), "
    "or turn engine.autoscaling and metrics.prometheusRule off if nothing is to read the metrics",
)
def metrics_disabled(ctx: ManifestsContext) -> Iterator[Hit]:
    scaled, alerts = _readers(ctx.manifests)
    if not scaled and not alerts:
        return
    serving = {id(c) for _, c in engines(ctx)}
    for m, where, spec in pod_templates(ctx.manifests):
        for path, c in container_paths(spec, where):
            off = stats_off(c.get("args")) if id(c) in serving else None
            if off is None:
                continue
            name = str(at(m, "metadata.name"))
            readers = [f"{s} (it scales on vllm:* in-flight requests)" for s in scaled.get(name, [])]
            if alerts:
                readers.append(f"the PrometheusRule's alerts {', '.join(sorted(set(alerts)))}")
            if not readers:
                continue  # its metrics feed nothing of the chart's
            yield Hit(
                f"container {c.get('name')}: {off.item} turns vLLM's stats off, and with them every vllm:* "
                f"metric on /metrics; {' and '.join(readers)} then read nothing: drop the flag",
                subject=subject(m),
                manifest_path=f"{path}.args[{off.index}]",
            )


__all__ = ["stats_off"]
