"""What every check returns: findings (problems with a location) and a status per check."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

# Check names, in the order the summary shows them. k8s schema checks are "k8s <minor>".
SCHEMA, RULES, LMCACHE, CURVINE, POLICY = "schema", "rules", "LMCache config", "Curvine TOML", "policy"
HYPERPOD_SDK = "HyperPod SDK"  # rendered InferenceEndpointConfigs through AWS's own models
SERVER = "API server (dry run)"  # the renders applied with server-side dry run (--server)
VLLM = "vLLM arguments"  # the engines' args through the pinned vLLM's own parser and config checks (--vllm)

Status = Literal["ok", "failed", "warning", "skipped", "not available"]
Severity = Literal["error", "warning"]
OK: Status = "ok"
FAILED: Status = "failed"
WARNED: Status = "warning"
SKIPPED: Status = "skipped"  # nothing of this kind to judge (e.g. no LMCache config in the render)
UNAVAILABLE: Status = "not available"  # there was something to judge, but the judge itself is missing


@dataclass(frozen=True)
class Finding:
    check: str  # one of the check names above, "render helm<N>" or "k8s <minor>"
    rule: str  # stable id: a rule id, or "schema.<keyword>", "k8s.schema", "render.error"
    message: str
    file: str = ""
    line: int | None = None
    column: int | None = None
    path: str = ""  # key path in the values (models[0].dtype) or in a manifest (spec.template...)
    subject: str = ""  # the manifest it is about (Deployment/x), when not the values file
    expected: str = ""
    suggestion: str = ""
    reason: str = ""  # a rule's one-line why
    severity: Severity = "error"

    def location(self) -> str:
        if not self.file:
            return self.subject
        where = f"{self.file}:{self.line}:{self.column}" if self.line else self.file
        return f"{where} ({self.subject})" if self.subject else where

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in ("", None)}


@dataclass
class CheckStatus:
    status: Status
    detail: str = ""  # why skipped/unavailable, or a count/summary


@dataclass(frozen=True)
class Judged:
    """A layer ran: its findings and, when there are none, what it judged ("3 file(s)")."""

    findings: list[Finding]
    detail: str = ""


@dataclass(frozen=True)
class NotRun:
    """A layer did not run: SKIPPED when there was nothing to judge, UNAVAILABLE when its judge is missing."""

    why: str
    status: Status = SKIPPED


Outcome = Judged | NotRun


@dataclass
class FileReport:
    file: str
    checks: dict[str, CheckStatus] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    fatal: str = ""  # unusable input: nothing else could run
    # (effective values, origins) of the file, to trace findings on rendered objects to their values key
    sources: Any = field(default=None, repr=False, compare=False)

    def add(self, check: str, findings: list[Finding], detail: str = "") -> None:
        self.findings.extend(findings)
        errors = [f for f in findings if f.severity == "error"]
        warnings = len(findings) - len(errors)
        status = FAILED if errors else WARNED if warnings else OK
        if errors:
            detail = f"{len(errors)} error(s)"
        elif warnings:
            detail = f"{warnings} warning(s)"
        self.checks[check] = CheckStatus(status, detail)

    def skip(self, check: str, why: str, status: Status = SKIPPED) -> None:
        self.checks[check] = CheckStatus(status, why)

    def record(self, check: str, outcome: Outcome) -> None:
        """A layer's outcome: its findings (the detail shown when there are none), or why it did not run."""
        if isinstance(outcome, NotRun):
            self.skip(check, outcome.why, outcome.status)
        else:
            self.add(check, outcome.findings, "" if outcome.findings else outcome.detail)

    @property
    def failed(self) -> bool:
        return any(f.severity == "error" for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "fatal": self.fatal or None,
            "checks": {name: asdict(status) for name, status in self.checks.items()},
            "findings": [f.to_json() for f in self.findings],
        }
