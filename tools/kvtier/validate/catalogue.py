"""The complete rule set of `kvtier validate`: imports every rule module (which registers its rules
into rules.REGISTRY), runs the rules of a scope, and lists them for `--list-rules` and the docs."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

# Imported for their registrations: each module's @rule functions add themselves to REGISTRY.
from kvtier.validate.checks import (  # noqa: F401
    apiserver_rules,
    backend_rules,
    chart_rules,
    coupling_rules,
    crosspod,
    curvine_rules,
    engine_args_rules,
    engine_rules,
    eviction_rules,
    gpu_rules,
    hostpath_rules,
    hyperpod_pod_rules,
    hyperpod_rules,
    kubelet_rules,
    l2_read_rules,
    metadata_rules,
    model_code_rules,
    model_format_rules,
    model_source_rules,
    network_rules,
    podsecurity,
    policy,
    resource_rules,
    revision_rules,
    router_rules,
    scheduler_rules,
    secret_rules,
    signal_rules,
    storage_rules,
    sysctl_rules,
    values_rules,
    workload_rules,
)
from kvtier.validate.findings import Finding
from kvtier.validate.inputs.loader import format_path
from kvtier.validate.rules import REGISTRY, ManifestsContext, Rule, ValuesContext


def all_rules() -> dict[str, Rule]:
    """Every registered rule by id (complete once this module's imports above have run)."""
    return REGISTRY


def run_values(
    ctx: ValuesContext, only: Iterable[str] | None = None, not_run: list[str] | None = None
) -> list[Finding]:
    """Findings of the values rules. With `not_run` given (the schema already failed), a rule that cannot
    read values of the wrong type is listed there instead of raising; on schema-valid values it raises."""
    out = []
    for r in _select("values", only):
        try:
            hits = list(r.check(ctx))
        except (TypeError, AttributeError, ValueError, KeyError, IndexError):
            if not_run is None:
                raise
            not_run.append(r.id)
            continue
        origins = ctx.where()
        for hit in hits:
            spot = origins.at(hit.path)
            message, severity = hit.settled()
            out.append(
                Finding(
                    r.check_name,
                    r.id,
                    f"{message} ({spot.note})" if spot.note else message,
                    spot.file,
                    spot.line,
                    spot.column,
                    format_path(hit.path),
                    suggestion=r.remedy,
                    reason=r.reason,
                    severity=severity,
                )
            )
    return out


def run_manifests(ctx: ManifestsContext, file: str, only: Iterable[str] | None = None) -> list[Finding]:
    out = []
    for r in _select("manifests", only):
        for hit in r.check(ctx):
            out.append(
                Finding(
                    r.check_name,
                    r.id,
                    hit.message,
                    file,
                    path=hit.manifest_path,
                    subject=hit.subject,
                    suggestion=r.remedy,
                    reason=r.reason,
                    severity=hit.severity,
                )
            )
    return out


def _select(scope: str, only: Iterable[str] | None) -> Iterator[Rule]:
    wanted = set(only) if only is not None else None
    for r in all_rules().values():
        if r.scope == scope and (wanted is None or r.id in wanted):
            yield r


def listing() -> list[dict[str, str]]:
    """Every rule as plain data (id, what it reads, summary row, reason, remedy): values, chart, manifests."""
    order = {"values": 0, "chart": 1, "manifests": 2}
    ordered = sorted(all_rules().values(), key=lambda r: (order[r.scope], r.id))
    return [
        {"id": r.id, "scope": r.scope, "row": r.check_name, "reason": r.reason, "remedy": r.remedy}
        for r in ordered
    ]


READS = {
    "values": "the effective values",
    "manifests": "the rendered objects",
    "chart": "the chart's own `fail` (Helm's refusal)",
}


def markdown() -> str:
    """The catalogue as a Markdown table (docs/validate.md; written by `kvtier generate`)."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| id | reads | reported under | why | what to do |", "|---|---|---|---|---|"]
    for r in listing():
        reads = READS[r["scope"]]
        lines.append(
            f"| `{r['id']}` | {reads} | {cell(r['row'])} | {cell(r['reason'])} | {cell(r['remedy'])} |"
        )
    return "\n".join(lines) + "\n"
