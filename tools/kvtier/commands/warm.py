"""`kvtier warm`: warm a release's shared L2 with its listed prefixes now, or the CPU rig's, and print the
warm-up's per-prefix report (docs/warmup.md)."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from kvtier import cliopts, exitcodes
from kvtier.engine_rig.errors import RigError
from kvtier.errors import UserError

BACKENDS = ("lmcache", "vllm-native")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "warm",
        help="warm the shared L2 with the release's listed prefixes and prove another replica loads them",
        description="Against a release (the default): run its warm-up hook Job again now, the one `helm "
        "install`/`upgrade` runs for cache.warmup.prefixes, and print its report. With --rig: warm the CPU "
        "rig's L2 from a prefixes file. Exit 1 when a prefix was not verified.",
    )
    cliopts.add_output(parser, json_alias=False)
    release = parser.add_argument_group("against a release (the default)")
    cliopts.add_cluster(release)
    release.add_argument("--release", default="kvtier", help="Helm release name (default: %(default)s)")
    release.add_argument("--model", help="only this models[].name (default: every model with prefixes)")
    rig = parser.add_argument_group("on this machine (CPU, no cluster)")
    rig.add_argument("--rig", action="store_true", help="start two replicas here and warm their L2")
    rig.add_argument(
        "--prefixes",
        type=Path,
        help="--rig: YAML of prefixes as under cache.warmup.prefixes.<model> ({name: {text|messages|file}})",
    )
    rig.add_argument("--backend", choices=BACKENDS, help="--rig: the cache backend (default: lmcache)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    console = Console(stderr=True)

    def log(line: str) -> None:
        console.print(line, markup=False)

    if args.rig:
        given = [flag for flag, value in (("--model", args.model), ("--kubeconfig", args.kubeconfig),
                 ("--context", args.context), ("-n/--namespace", args.namespace)) if value]  # fmt: skip
        if given:
            raise UserError(f"--rig starts its own replicas: leave out {', '.join(given)}")
        if args.prefixes is None:
            raise UserError("--rig needs --prefixes FILE (the prefixes to warm)")
        reports = [_rig(args, log)]
    else:
        if args.prefixes is not None or args.backend is not None:
            raise UserError(
                "--prefixes and --backend are for --rig; a release warms the prefixes its values list "
                "(cache.warmup.prefixes)"
            )
        reports = _release(args, log)
    if args.output == "json":
        print(json.dumps(reports, indent=2))
    else:
        print(table(reports))
    return exitcodes.OK if all(report.get("ok") for report in reports) else exitcodes.FINDINGS


def _rig(args: argparse.Namespace, log: Any) -> dict[str, Any]:
    from kvtier.warmup import rig

    prefixes = rig.load(args.prefixes)
    try:
        with tempfile.TemporaryDirectory(prefix="kvtier-warm-") as work:
            report = rig.run(prefixes, Path(work), args.backend or "lmcache", log)
    except RigError as error:
        raise UserError(f"the rig could not run: {error}") from None
    return {"model": "rig", **report}


def _release(args: argparse.Namespace, log: Any) -> list[dict[str, Any]]:
    import urllib3
    from kubernetes import client

    from kvtier.warmup import release

    kube = cliopts.resolve(args, instead=", or give --rig")
    api_client = cliopts.api_client(kube)
    core, batch = client.CoreV1Api(api_client), client.BatchV1Api(api_client)
    try:
        record = release.latest_release(core, kube.namespace, args.release)
        jobs = release.warmup_jobs(record, args.model)
        suffix = time.strftime("%m%d%H%M%S", time.gmtime())
        reports = []
        for job in jobs:
            finished = release.run_job(batch, core, kube.namespace, release.rerun_manifest(job, suffix), log)
            report = finished.report or {
                "ok": False,
                "summary": f"job/{finished.job} printed no report; its log ends:\n{finished.log_tail}",
                "prefixes": [],
            }
            reports.append({"model": job.model, "job": finished.job, **report})
    except client.ApiException as error:
        reason = f"{error.status} {error.reason}"
        raise UserError(
            f"release {args.release} in namespace {kube.namespace} (context {kube.context}): the API "
            f"server answered {reason} (kvtier warm needs get/list Secrets, create/get Jobs, list Pods, "
            "get pods/log)"
        ) from None
    except (urllib3.exceptions.HTTPError, OSError) as error:  # no API server there, TLS, DNS
        raise UserError(
            f"cannot reach the API server of context {kube.context} (kubeconfig {kube.kubeconfig}): "
            f"{str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__}"
        ) from None
    return reports


def table(reports: list[dict[str, Any]]) -> str:
    rows = [("model", "prefix", "tokens", "chunks", "written", "loaded by another replica", "pinned")]
    for report in reports:
        for p in report.get("prefixes") or []:
            written = "-" if p.get("written") is None else str(p["written"])
            if p.get("already_cached"):
                written += " (cached before)"
            if p.get("proof") == "files":
                loaded = "cached there; pinned files in L2"
            elif p.get("verified"):
                loaded = f"{p.get('verified_tokens')} tokens"
            else:
                loaded = "NO"
            pinned = "-" if p.get("pinned") is None else str(p["pinned"])
            rows.append(
                (report["model"], p["prefix"], str(p["tokens"]), str(p["chunks"]), written, loaded, pinned)
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]
    lines += [f"{report['model']}: {report.get('summary', '')}" for report in reports]
    return "\n".join(line.rstrip() for line in lines)
