"""Run every check of `kvtier validate` over environment files and collect one report per file.

Order: render with Helm 3 and 4 in parallel (all files at once, in the background) -> the API server that
judges, if any -> load (with positions) -> schema -> rules on the effective values (a StorageClass read on
that server) -> per render: Kubernetes schemas per minor, LMCache, Curvine, policy, the live judges.
"""

from __future__ import annotations

import json
import threading
from functools import cache
from pathlib import Path
from typing import Any

from kvtier import exitcodes, paths
from kvtier import schema as schema_source
from kvtier.errors import UserError
from kvtier.validate import catalogue, rules
from kvtier.validate.checks import crosspod, podsecurity
from kvtier.validate.checks.crosspod import CROSSPOD
from kvtier.validate.findings import (
    CURVINE,
    HYPERPOD_SDK,
    LMCACHE,
    POLICY,
    RULES,
    SCHEMA,
    SERVER,
    VLLM,
    FileReport,
    Finding,
)
from kvtier.validate.inputs import loader, merge, provenance, setvalues
from kvtier.validate.inputs.deployed import release_values
from kvtier.validate.inputs.origins import Origins
from kvtier.validate.layers import configs, hyperpod_sdk_check, kube, live_judges, render, schema_check
from kvtier.validate.options import Options, collect

PSS_LABEL = "pod-security.kubernetes.io/enforce"


def check_values(
    path: Path,
    options: Options,
    deployed: dict[str, Any] | None = None,
    storage_classes: Any = None,
) -> tuple[FileReport, Any]:
    """Load, schema and rules layers (in-process, no Helm). Returns the report and the loaded file.
    `storage_classes`: what the judging cluster says a StorageClass is (live_judges.storage_classes)."""
    try:
        loaded = loader.load(path)
        layers = [loaded, *(loader.load(extra) for extra in options.values)]
    except UserError as error:
        return FileReport(str(path), fatal=str(error)), None
    return check_loaded(loaded, options, deployed, layers, storage_classes), loaded


def check_loaded(
    loaded: loader.Loaded,
    options: Options,
    deployed: dict[str, Any] | None = None,
    layers: list[loader.Loaded] | None = None,
    storage_classes: Any = None,
) -> FileReport:
    """The schema and rules layers on the values Helm would use: the chart defaults coalesced with
    `layers` (the user's -f files in order; default: `loaded` alone) and the options' --set values,
    reported under `loaded`."""
    report = FileReport(str(loaded.path))
    layers = layers or [loaded]
    try:
        user = setvalues.apply(
            merge.merge_layers(*(layer.data for layer in layers)),
            list(options.sets),
            list(options.set_strings),
        )
    except UserError as error:
        return FileReport(str(loaded.path), fatal=str(error))
    layers = layers + setvalues.layers(options.sets, options.set_strings)
    try:
        effective = merge.compute(user)
    except merge.TypeMismatch as error:  # Helm stops before its schemas: nothing else can be judged
        report.add(SCHEMA, [_type_mismatch(error, layers)])
        report.skip(RULES, "Helm refuses the values before any schema (type mismatch)")
        return report
    origins = Origins(layers, effective.chart)
    report.sources = (effective.values, origins)
    schema_findings = schema_check.check(effective, origins, options.schema_source)
    report.add(SCHEMA, schema_findings + _stale_copies())
    ctx = rules.ValuesContext(
        effective.values, loaded, deployed, origins, dict(options.model_configs), storage_classes
    )
    not_run: list[str] = []
    found = catalogue.run_values(ctx, not_run=not_run if schema_findings else None)
    count = sum(1 for r in catalogue.all_rules().values() if r.scope == "values")
    report.add(RULES, found, "" if found or not_run else f"{count} rules")
    notes = (
        [f"{len(not_run)} rule(s) not evaluated on values of the wrong type: {', '.join(not_run)}"]
        if not_run
        else []
    )
    if options.kube_context is None and not found:
        notes.append("deployed master count not compared (no --context)")
    if notes:
        detail = report.checks[RULES].detail
        report.checks[RULES].detail = "; ".join([detail, *notes] if detail else notes)
    return report


def _type_mismatch(error: merge.TypeMismatch, layers: list[loader.Loaded]) -> Finding:
    spot = Origins(layers).at(error.path, value=True)
    return Finding(
        SCHEMA,
        "schema.type",
        f"wrong type: found {schema_check.type_name(error.found)}; Helm stops with "
        f"'type mismatch on {error.path[-1]}'",
        spot.file,
        spot.line,
        spot.column,
        loader.format_path(error.path),
        expected="object (a subchart's values)",
    )


@cache
def _stale_copy_paths() -> tuple[str, ...]:
    """Charts whose values.schema.json does not hold the schema `kvtier generate` would bundle from
    schema/ (the bundles are shared with the schema check). Compared as JSON documents: layout is the
    drift test's business, a different schema is Helm's. Parsing costs ~ms; re-serialising with indent
    in pure Python would cost ~0.2 s per run."""
    out = []
    for chart, source in schema_source.chart_sources().items():
        copy = paths.CHARTS / chart / "values.schema.json"
        try:
            expected = schema_check.bundled(source)
        except (OSError, UserError):
            continue  # an unreadable source is reported by the schema check itself
        try:
            current = json.loads(copy.read_text()) if copy.is_file() else None
        except (OSError, ValueError):
            current = None
        if current != expected:
            out.append(str(copy.relative_to(paths.ROOT)))
    return tuple(out)


def _stale_copies() -> list[Finding]:
    """A chart's values.schema.json that differs from schema/: Helm would check against another schema."""
    return [
        Finding(
            SCHEMA,
            "schema.stale-copy",
            f"{p} differs from its source in schema/",
            p,
            suggestion="run `kvtier generate` (Helm validates values against the chart's copy)",
        )
        for p in _stale_copy_paths()
    ]


def distinct_manifests(renders: list[render.Render]) -> list[dict[str, Any]]:
    """The objects of a file's renders, each distinct one once (Helm 3 and 4 usually agree)."""
    unique: dict[str, dict[str, Any]] = {}
    for r in renders:
        for m in r.manifests:
            unique.setdefault(repr(sorted(m.items(), key=str)), m)
    return list(unique.values())


def check_render(report: FileReport, renders: list[render.Render], options: Options) -> list[dict[str, Any]]:
    """Kubernetes schemas, config files and policy over the renders of one file; the distinct objects
    judged (none when nothing rendered)."""
    good = [r for r in renders if not r.error]
    if not good:
        why = "no render (Helm refused the values)" if renders else "not rendered"
        for check in [
            *(f"k8s {m}" for m in options.minors),
            LMCACHE,
            CURVINE,
            HYPERPOD_SDK,
            CROSSPOD,
            POLICY,
        ]:
            report.skip(check, why)
        return []
    manifests = distinct_manifests(good)
    verdicts = [kube.check_minors(m, options.minors) for m in manifests]
    for minor in options.minors:
        findings, uncovered = [], set()
        for m, verdict in zip(manifests, verdicts, strict=True):
            errors = verdict[minor]
            if errors is None:
                api, kind = str(m.get("apiVersion")), str(m.get("kind"))
                if not kube.builtin_group(api):
                    uncovered.add(kind)
                    continue
                served = kube.served_in(api, kind)
                since = f"its schemas cover {served[0]}-{served[-1]}" if served else "no minor knows it"
                findings.append(
                    Finding(
                        f"k8s {minor}",
                        "k8s.not-served",
                        f"{api} {kind} is not served by Kubernetes {minor} ({since})",
                        report.file,
                        subject=_subject(m),
                        severity="warning",
                        suggestion="the chart may pick another version at install time; else validate with "
                        "--kube-versions for the minors this environment targets",
                    )
                )
                continue
            findings += [
                Finding(f"k8s {minor}", "k8s.schema", e, report.file, subject=_subject(m)) for e in errors
            ]
        detail = f"{len(manifests) - sum(m.get('kind') in uncovered for m in manifests)} objects"
        if uncovered:
            kinds = ", ".join(sorted(uncovered))
            detail += f"; no schema for {kinds} (custom resources: checked by the cluster tests)"
        report.add(f"k8s {minor}", findings, detail if not findings else "")
    for check in (LMCACHE, CURVINE):
        report.record(check, configs.run(good[0].manifests, check, report.file))
    report.record(HYPERPOD_SDK, hyperpod_sdk_check.run(good[0].manifests, report.file))
    levels = {
        (m.get("metadata") or {}).get("name"): ((m.get("metadata") or {}).get("labels") or {}).get(PSS_LABEL)
        for m in manifests
        if m.get("kind") == "Namespace"
    }
    levels = {k: v for k, v in levels.items() if k and v} | options.pod_security
    ctx = rules.ManifestsContext(manifests, options.namespace, levels)
    found = catalogue.run_manifests(ctx, report.file)
    crosspod_found = [f for f in found if f.check == CROSSPOD]
    engines = sum(1 for _ in crosspod.engines(ctx))
    report.add(
        CROSSPOD,
        crosspod_found,
        ""
        if crosspod_found
        else f"{engines} engine(s)"
        if engines
        else "no engine pods rendered (hyperpod: the operator renders them)",
    )
    found = [f for f in found if f.check != CROSSPOD]
    report.add(
        POLICY, found, "" if found else podsecurity.pod_security_summary(manifests, options.namespace, levels)
    )
    return manifests


def _refusal(report: FileReport, finding: Finding) -> Finding:
    if report.sources is None:
        return finding
    values, origins = report.sources
    return provenance.retarget_refusal(finding, values, origins)


def _trace_rendered(report: FileReport, manifests: list[dict[str, Any]]) -> None:
    """Findings on rendered objects, pointed at the values key (and the user's line) that produced them."""
    if report.sources is None or not manifests:
        return
    values, origins = report.sources
    by_subject = {_subject(m): m for m in manifests}
    report.findings = [
        provenance.retarget(f, by_subject, values, origins) if f.subject else f for f in report.findings
    ]


def _subject(m: dict[str, Any]) -> str:
    return f"{m.get('kind')}/{(m.get('metadata') or {}).get('name')}"


def _preload(options: Options) -> None:
    kube.preload(options.minors)
    configs.warm()
    _stale_copy_paths()


def _blocked(report: FileReport, problem: str) -> str:
    """Why a file is not rendered: the chart cannot be prepared, the file is unusable or fails the schema."""
    if problem or report.fatal:
        return problem or "unusable input"
    if any(f.rule.startswith("schema.") and f.rule != "schema.stale-copy" for f in report.findings):
        return "schema errors (Helm would refuse the values)"
    return ""


def validate(
    files: list[Path], options: Options, started: render.Started | None = None, judge: Any = None
) -> list[FileReport]:
    """Every layer for every file. Renders start first (or were started by the caller, `render.start`),
    so Helm runs while the in-process layers do. `judge`: an API server (server.Judge) to dry-run on, for
    callers that hold one; else --server connects one."""
    deployed = None
    if options.kube_context:
        deployed = release_values(
            options.kube_context, options.release, options.namespace, options.kubeconfig
        )
    if not options.render:
        classes = live_judges.storage_classes(None, options)
        return [check_values(path, options, deployed, classes)[0] for path in files]
    if started is None:
        started = render.start(
            files,
            options.helm_majors,
            options.release,
            options.namespace,
            options.kube_version,
            options.jobs,
            options.overlay(),
        )
    warm = threading.Thread(target=_preload, args=(options,), daemon=True)
    warm.start()  # load schemas while Helm renders
    judged: list[tuple[FileReport, Any, list[dict[str, Any]]]] = []  # for the vLLM layer
    # The judge first: the rules ask it what the L2's StorageClass is.
    with live_judges.server_judge(options, judge) as judge:
        classes = live_judges.storage_classes(judge, options)
        checked = [check_values(path, options, deployed, classes) for path in files]
        warm.join()
        hyperpod_sdk_check.prefetch(
            [
                r.manifests
                for (report, _), futures in zip(checked, started.pending, strict=True)
                if not _blocked(report, started.problem)
                for r in (f.result() for f in futures[:1])
                if not r.error
            ]
        )
        for (report, loaded), futures in zip(checked, started.pending, strict=True):
            blocked = _blocked(report, started.problem)
            renders = [f.result() for f in futures]  # a blocked file's renders are waited for, then dropped
            if blocked:
                for major in options.helm_majors:
                    report.skip(f"render helm{major}", blocked)
                if not report.fatal:
                    check_render(report, [], options)
                    report.skip(SERVER, blocked)
                    report.skip(VLLM, blocked)
                continue
            for r in renders:
                found = [_refusal(report, render.finding(r, report.file))] if r.error else []
                report.add(f"render helm{r.major}", found, "" if r.error else f"{len(r.manifests)} objects")
            manifests = check_render(report, renders, options)
            live_judges.check_server(report, manifests, loaded, judge, options)
            live_judges.check_cluster(report, manifests, options)
            _trace_rendered(report, manifests)
            good = [r for r in renders if not r.error]
            if good:
                judged.append((report, loaded, good[0].manifests))
            else:
                report.skip(VLLM, "no render (Helm refused the values)")
    live_judges.check_vllm(judged, options)
    return [report for report, _ in checked]


def exit_code(reports: list[FileReport]) -> int:
    if any(r.fatal for r in reports):
        return exitcodes.USAGE
    return exitcodes.FINDINGS if any(r.failed for r in reports) else exitcodes.OK


__all__ = ["RULES", "Options", "collect", "exit_code", "validate"]
