"""`kvtier smoke`: the post-install checks (the same ones the charts' `helm test` pods run, from
kvcheck.py), against URLs or a cluster, as a pass/fail/skip list with a remedy for each failure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kvtier.podscripts import kvcheck

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"


@dataclass
class Targets:
    """What to check. URL mode fills these directly; cluster mode fills them from port-forwards."""

    router: str | None = None
    replicas: list[str] = field(default_factory=list)
    model: str | None = None
    l2_enabled: bool = False
    l2_dir: str | None = None  # a directory this process can read (URL mode)
    l2_files: Callable[[], dict[str, Any]] | None = None  # runs the l2-files check in a pod (cluster)
    curvine: str | None = None
    curvine_workers: int = 1
    words: int = 1500


@dataclass(frozen=True)
class SmokeCheck:
    id: str
    reason: str  # what a pass proves
    remedy: str  # where to look when it fails
    run: Callable[[Targets], dict[str, Any] | str]  # a result, or why it is skipped


def _router(t: Targets) -> dict[str, Any] | str:
    if not t.router:
        return "no router URL"
    outcome = kvcheck.check_router(t.router)
    if outcome["ok"] and not t.model:
        t.model = outcome["models"][0]
    return outcome


def _completion(t: Targets) -> dict[str, Any] | str:
    if not t.router or not t.model:
        return "no router URL or model"
    return kvcheck.check_completion(t.router, t.model)


def _crosspod(t: Targets) -> dict[str, Any] | str:
    if not t.l2_enabled:
        return "L2 is off: no shared tier to hit across pods"
    if len(t.replicas) < 2 or not t.model:
        return "needs two replicas and a model"
    return kvcheck.check_crosspod(t.replicas[0], t.replicas[1], t.model, words=t.words)


def _l2_files(t: Targets) -> dict[str, Any] | str:
    if not t.l2_enabled:
        return "L2 is off"
    if t.l2_files:
        return t.l2_files()
    if t.l2_dir:
        return kvcheck.check_l2_files(t.l2_dir)
    return "no L2 directory to look at (--l2-dir)"


def _curvine(t: Targets) -> dict[str, Any] | str:
    if not t.curvine:
        return "no Curvine master URL"
    return kvcheck.check_curvine_workers(t.curvine, t.curvine_workers)


CHECKS = (
    SmokeCheck(
        "router", "router is healthy and lists the model", "router logs; are engine pods Ready?", _router
    ),
    SmokeCheck(
        "completion", "a completion flows router -> engine", "engine logs; model name and load", _completion
    ),
    SmokeCheck(
        "crosspod",
        "replica B reuses replica A's KV cache through L2, with a lower TTFT",
        "same PYTHONHASHSEED, chunk size, model string and L2 mount on every replica; LMCache logs",
        _crosspod,
    ),
    SmokeCheck(
        "l2-files",
        "LMCache wrote chunk files to the shared L2",
        "PVC mount and LMCACHE_REMOTE_URL",
        _l2_files,
    ),
    SmokeCheck(
        "curvine-workers", "Curvine master sees its workers", "worker pods and their data dirs", _curvine
    ),
)


def run_checks(targets: Targets, step: Callable[[str], None] = lambda _id: None) -> list[dict[str, Any]]:
    """Every check in order; each outcome has id, status (PASS/FAIL/SKIP), summary, remedy."""
    outcomes = []
    for check in CHECKS:
        step(check.id)
        try:
            raw = check.run(targets)
        except kvcheck.CheckError as error:
            raw = kvcheck.result(check.id, False, str(error), error=True)
        if isinstance(raw, str):
            outcomes.append({"id": check.id, "status": SKIP, "summary": raw, "reason": check.reason})
            continue
        status = PASS if raw["ok"] else FAIL
        outcome = {"id": check.id, "status": status, "reason": check.reason, **raw}
        if status == FAIL:
            outcome["remedy"] = check.remedy
        outcomes.append(outcome)
    return outcomes
