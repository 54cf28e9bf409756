"""The `HyperPod SDK` layer of `kvtier validate`: every rendered InferenceEndpointConfig through the pinned
`sagemaker-hyperpod` SDK's own Pydantic models (kvtier.upstream.hyperpod_sdk).

A wrong value is an error. A field the SDK's model does not have is a warning: the SDK lags the operator
(3.12.0 has no v3.7 `tolerations` or `lmcache.mode`), so the operator may still accept it; the CRD and the
cluster tests decide. Without the SDK's venv the layer says so and is "not available", never passed.
"""

from __future__ import annotations

import contextlib
from typing import Any

from kvtier.errors import UserError
from kvtier.upstream import hyperpod_fields, hyperpod_sdk
from kvtier.validate.findings import HYPERPOD_SDK, UNAVAILABLE, Finding, Judged, NotRun, Outcome


def prefetch(renders: list[list[dict[str, Any]]]) -> None:
    """Ask the SDK about the endpoints of every render at once: one SDK process per run, not per file
    (run() then reads the verdicts back)."""
    specs = [m.get("spec") or {} for ms in renders for m in ms if m.get("kind") == hyperpod_fields.KIND]
    if specs and not hyperpod_sdk.missing():
        with contextlib.suppress(UserError):  # run() reports it, per file
            hyperpod_sdk.validate_specs(specs)


def run(manifests: list[dict[str, Any]], file: str) -> Outcome:
    """Findings for the rendered endpoints; NotRun when there is none (skipped) or the SDK cannot run."""
    endpoints = [m for m in manifests if m.get("kind") == hyperpod_fields.KIND]
    if not endpoints:
        return NotRun("no InferenceEndpointConfig in the render (target standalone)")
    why = hyperpod_sdk.missing()
    if why:
        return NotRun(why, UNAVAILABLE)
    try:
        results = hyperpod_sdk.validate_specs([e.get("spec") or {} for e in endpoints])
    except UserError as error:
        return NotRun(str(error), UNAVAILABLE)
    sdk = f"sagemaker-hyperpod {hyperpod_sdk.pinned_version()}"
    findings = []
    for endpoint, problems in zip(endpoints, results, strict=True):
        subject = f"{hyperpod_fields.KIND}/{(endpoint.get('metadata') or {}).get('name')}"
        for p in problems:
            if p.unknown:
                findings.append(
                    Finding(
                        HYPERPOD_SDK,
                        "hyperpod-sdk.unknown-field",
                        f"{p.path}: a field {sdk} does not know",
                        file,
                        path=p.path,
                        subject=subject,
                        severity="warning",
                        suggestion="fine if the installed operator has it (docs/hyperpod.md, operator "
                        "versions); else remove it",
                    )
                )
            else:
                findings.append(
                    Finding(
                        HYPERPOD_SDK,
                        "hyperpod-sdk.invalid",
                        f"{p.path}: {p.message}",
                        file,
                        path=p.path,
                        subject=subject,
                    )
                )
    return Judged(findings, f"{len(endpoints)} endpoint(s), {sdk}")
