"""The rule framework: every cross-field rule is declared once, as data, with a stable id.

A rule has an id, a one-line reason (why it matters), a remedy (what to do) and a check function.
`values` rules see the effective values (chart defaults + the environment file); `manifests` rules
see the rendered objects; `chart` rules are a template `fail` of the charts, declared for the catalogue
and read back from Helm's refusal. A check yields Hits; the runner turns them into Findings with positions.

The rule modules (values_rules, storage_rules, policy, podsecurity, crosspod, ...) register into REGISTRY
with `@rule`, chart_rules with `declare`; this module imports none of them. catalogue.py imports them all
and runs the set.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kvtier.validate.findings import RULES, Severity
from kvtier.validate.inputs.loader import KeyPath, Loaded
from kvtier.validate.inputs.origins import Origins

RENDER = "render helm3 / helm4"  # the summary rows a chart rule's refusal counts under
# What a rule reads: the effective values, the rendered objects, or nothing here (a chart's template `fail`,
# read back from Helm's refusal).
Scope = Literal["values", "manifests", "chart"]


@dataclass(frozen=True)
class Hit:
    message: str
    path: KeyPath = ()  # values rules: key path in the values
    subject: str = ""  # manifests rules: Kind/name
    manifest_path: str = ""
    severity: Severity = "error"  # or "warning": a likely mistake the rule cannot prove
    # The shipped facts the judgement rests on that were not confirmed against their published source
    # (kvtier.facts), in words; an error resting on one is reported as a warning (`settled`).
    unconfirmed: str = ""

    def settled(self) -> tuple[str, Severity]:
        """(message, severity) as reported: no refusal rests on a fact that was not confirmed."""
        if not self.unconfirmed or self.severity != "error":
            return self.message, self.severity
        return (
            f"{self.message} [a warning, not an error: it rests on {self.unconfirmed}, shipped but not "
            "confirmed against the published source (tools/kvtier/facts); check that figure there]",
            "warning",
        )


@dataclass
class ValuesContext:
    values: dict[str, Any]  # effective values: chart defaults merged with the environment file
    loaded: Loaded  # the environment file, for positions
    deployed: dict[str, Any] | None = None  # values of the release in the cluster (--context)
    origins: Origins | None = None  # where each effective value comes from; None: `loaded` alone
    # --model-config files by model id ("" for any model): kvtier.validate.model_facts reads them
    model_configs: dict[str, Path] = field(default_factory=dict)
    # A StorageClass as the judging cluster serves it (kvtier.validate.layers.storage_classes.reader):
    # name -> ClusterClass; None offline, where only the class's name is known.
    storage_classes: Callable[[str], Any] | None = None

    def where(self) -> Origins:
        return self.origins or Origins([self.loaded])


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
    scope: Scope
    check: Callable[[Any], Iterable[Hit]]
    check_name: str = RULES  # the summary row its findings count under


REGISTRY: dict[str, Rule] = {}


def rule(rule_id: str, reason: str, remedy: str, scope: Scope = "values", check_name: str = RULES):
    """Decorator: register a check function as a rule (ids are unique)."""

    def register(fn: Callable[[Any], Iterable[Hit]]) -> Callable[[Any], Iterable[Hit]]:
        if rule_id in REGISTRY:
            raise ValueError(f"duplicate rule id {rule_id}")
        REGISTRY[rule_id] = Rule(rule_id, reason, remedy, scope, fn, check_name)
        return fn

    return register


def declare(rule_id: str, reason: str, remedy: str) -> None:
    """Register a rule a chart enforces with a template `fail` (chart_rules.py): catalogued, not run."""
    rule(rule_id, reason, remedy, scope="chart", check_name=RENDER)(_enforced_by_the_chart)


def _enforced_by_the_chart(_ctx: Any) -> Iterable[Hit]:
    return ()


__all__ = ["REGISTRY", "Hit", "ManifestsContext", "Rule", "ValuesContext", "declare", "rule"]
