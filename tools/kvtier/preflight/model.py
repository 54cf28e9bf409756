"""What a preflight run works on (the target) and what each check returns (a result)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from kvtier.cluster.common.rest import Rest

Status = Literal["pass", "warn", "fail", "skip"]
SEVERITY = {"pass": 0, "skip": 0, "warn": 1, "fail": 2}


@dataclass(frozen=True)
class Result:
    rule: str
    status: Status
    detail: str


@dataclass
class Target:
    """The values (defaults merged), where they go, and a client for the cluster."""

    values: dict[str, Any]
    release: str
    namespace: str
    rest: Rest
    manifests: list[dict[str, Any]] | None = None  # rendered objects; None when rendering failed
    render_error: str = ""
    notes: list[str] = field(default_factory=list)

    def get(self, dotted: str, default: Any = None) -> Any:
        """A value by dotted path (`curvine.master.replicas`), or `default` when any part is missing."""
        node: Any = self.values
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    @property
    def hyperpod(self) -> bool:
        return self.get("target", "standalone") == "hyperpod"

    @property
    def curvine(self) -> bool:
        return bool(self.get("curvine.enabled", True))

    @cached_property
    def nodes(self) -> list[dict[str, Any]]:
        return list(self.rest.get("/api/v1/nodes")["items"])
