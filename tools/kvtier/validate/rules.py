"""The rule framework: every cross-field rule is declared once, as data, with a stable id.

A rule has an id, a one-line reason (why it matters), a remedy (what to do) and a check function.
`values` rules see the effective values (chart defaults + the environment file); `manifests` rules
see the rendered objects. A check yields Hits; the runner turns them into Findings with positions.

The rule modules (values_rules, storage_rules, l2_access_rules, policy, podsecurity, crosspod) register
into REGISTRY with `@rule`; this module imports none of them. catalogue.py imports them all and runs the set.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kvtier.validate.findings import RULES
from kvtier.validate.loader import KeyPath, Loaded
from kvtier.validate.origins import Origins


@dataclass(frozen=True)
class Hit:
    message: str
    path: KeyPath = ()  # values rules: key path in the values
    subject: str = ""  # manifests rules: Kind/name
    manifest_path: str = ""
    severity: str = "error"  # or "warning": a likely mistake the rule cannot prove


@dataclass
class ValuesContext:
    values: dict[str, Any]  # effective values: chart defaults merged with the environment file
    loaded: Loaded  # the environment file, for positions
    deployed: dict[str, Any] | None = None  # values of the release in the cluster (--context)
    origins: Origins | None = None  # where each effective value comes from; None: `loaded` alone

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


__all__ = ["REGISTRY", "Hit", "ManifestsContext", "Rule", "ValuesContext", "rule"]
