"""The rule framework: every cross-field rule is declared once, as data, with a stable id.

A rule has an id, a one-line reason (why it matters), a remedy (what to do) and a check function.
`values` rules see the effective values (chart defaults + the environment file); `manifests` rules
see the rendered objects. A check yields Hits; the runner turns them into Findings with positions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kvtier.validate.findings import POLICY, RULES, Finding
from kvtier.validate.loader import KeyPath, Loaded, format_path


@dataclass(frozen=True)
class Hit:
    message: str
    path: KeyPath = ()  # values rules: key path in the values
    subject: str = ""  # manifests rules: Kind/name
    manifest_path: str = ""


@dataclass
class ValuesContext:
    values: dict[str, Any]  # effective values: chart defaults merged with the environment file
    loaded: Loaded  # the environment file, for positions
    deployed: dict[str, Any] | None = None  # values of the release in the cluster (--kube-context)


@dataclass
class ManifestsContext:
    manifests: list[dict[str, Any]]
    namespace: str
    pod_security: dict[str, str] = field(default_factory=dict)  # namespace -> enforce level


@dataclass(frozen=True)
class Rule:
    id: str
    reason: str
    remedy: str
    scope: str  # "values" | "manifests"
    check: Callable[[Any], Iterable[Hit]]
    check_name: str = RULES  # the summary row its findings count under


REGISTRY: dict[str, Rule] = {}


def rule(rule_id: str, reason: str, remedy: str, scope: str = "values", check_name: str = RULES):
    """Decorator: register a check function as a rule (ids are unique)."""

    def register(fn: Callable[[Any], Iterable[Hit]]) -> Callable[[Any], Iterable[Hit]]:
        if rule_id in REGISTRY:
            raise ValueError(f"duplicate rule id {rule_id}")
        REGISTRY[rule_id] = Rule(rule_id, reason, remedy, scope, fn, check_name)
        return fn

    return register


def all_rules() -> dict[str, Rule]:
    # importing the rule modules registers their rules
    from kvtier.validate import crosspod, podsecurity, policy, storage_rules, values_rules  # noqa: F401

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
        for hit in hits:
            in_file = any(hit.path[:n] in ctx.loaded.marks for n in range(len(hit.path), 0, -1))
            line, col = ctx.loaded.where(hit.path) if in_file else (None, None)
            message = hit.message if in_file else f"{hit.message} (from the chart defaults)"
            out.append(
                Finding(
                    r.check_name,
                    r.id,
                    message,
                    str(ctx.loaded.path),
                    line,
                    col,
                    format_path(hit.path),
                    suggestion=r.remedy,
                    reason=r.reason,
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
                )
            )
    return out


def _select(scope: str, only: Iterable[str] | None) -> Iterator[Rule]:
    wanted = set(only) if only is not None else None
    for r in all_rules().values():
        if r.scope == scope and (wanted is None or r.id in wanted):
            yield r


def catalogue() -> list[dict[str, str]]:
    """Every rule as plain data (id, what it reads, summary row, reason, remedy), values rules first."""
    ordered = sorted(all_rules().values(), key=lambda r: (r.scope != "values", r.id))
    return [
        {"id": r.id, "scope": r.scope, "row": r.check_name, "reason": r.reason, "remedy": r.remedy}
        for r in ordered
    ]


def catalogue_markdown() -> str:
    """The catalogue as a Markdown table (docs/validate.md; written by `kvtier generate`)."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| id | reads | reported under | why | what to do |", "|---|---|---|---|---|"]
    for r in catalogue():
        reads = "the effective values" if r["scope"] == "values" else "the rendered objects"
        lines.append(
            f"| `{r['id']}` | {reads} | {cell(r['row'])} | {cell(r['reason'])} | {cell(r['remedy'])} |"
        )
    return "\n".join(lines) + "\n"


__all__ = [
    "POLICY",
    "Hit",
    "ManifestsContext",
    "Rule",
    "ValuesContext",
    "all_rules",
    "catalogue",
    "catalogue_markdown",
    "rule",
]
