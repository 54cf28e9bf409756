"""`kvtier soak`: the load mix under faults, every answer held to its reference, on the CPU rig or against
a release in a cluster (docs/reliability.md)."""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rich.console import Console

from kvtier import cliopts, exitcodes
from kvtier.bench import run as bench_run
from kvtier.engine_rig import tiers as tier_rig
from kvtier.engine_rig.errors import RigError
from kvtier.errors import UserError
from kvtier.load import driver, experiment, soak, soak_release, soak_rig, workload
from kvtier.podscripts import kvcheck
from kvtier.smoke import reach

Log = Callable[[str], None]
ID_SPACE = 2**40  # fresh prompt ids against a release, whose L2 outlives runs (as kvtier load's)


def faults(text: str) -> list[str]:
    """An argparse type: comma-separated fault names (`--faults none,kill-engine`)."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in soak.FAULTS]
    if not names or unknown:
        said = f"{unknown[0]!r} is not a fault" if unknown else "no fault named"
        raise argparse.ArgumentTypeError(f"{said}; expected some of {','.join(soak.FAULTS)}")
    return names


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "soak",
        help="the load mix under faults: failed requests, wrong answers, lost chunks (docs/reliability.md)",
        description="Each prompt's greedy reference first, then the mix through the router replicas while "
        "each fault is injected in turn. Against a release (the default) faults are forced pod deletes and "
        "chunk-file damage through `kubectl exec`: run it on a staging release. Exit 1 when an answer was "
        "wrong, a chunk was lost, a fault could not be injected or a request failed (an answer cut short "
        "included) that no killed replica explains.",
    )
    parser.add_argument(
        "--faults",
        type=faults,
        help=f"faults, in order (default: every one the target supports, of {','.join(soak.FAULTS)})",
    )
    parser.add_argument("--requests", type=int, default=40, help="requests per fault (1-1000)")
    parser.add_argument("--qps", type=float, default=3.0, help="offered request rate")
    parser.add_argument("--seed", type=int, default=0, help="the mix's seed")
    parser.add_argument(
        "--max-prompt-tokens", type=int, help="the mix's context bound (default: the model's, or the rig's)"
    )
    parser.add_argument("--out", type=Path, default=Path("soak-results"), help="folder for soak.json")
    cliopts.add_output(parser, json_alias=False)
    release = parser.add_argument_group("against a release (the default)")
    release.add_argument(
        "--router-url",
        type=cliopts.http_url,
        action="append",
        default=[],
        help="the router Service's URL where it resolves (repeatable; default: a port-forward per router "
        "pod, which kill-router cannot use)",
    )
    release.add_argument(
        "--reference-url",
        type=cliopts.http_url,
        help="a server of the same model with no cache, for the references (default: the release, one "
        "request at a time before any fault)",
    )
    release.add_argument("--model", help="served model name (default: the first the router lists)")
    release.add_argument("--tokenizer", help="tokenizer folder or Hugging Face id (default: --model)")
    reach.add_cluster_arguments(parser)
    release.add_argument(
        "--curvine-namespace",
        help="namespace of the L2's Curvine pods, for the curvine-leader and curvine-worker faults (default: "
        "the release's, where the umbrella's Curvine subchart runs; its masters by --curvine-selector)",
    )
    rig = parser.add_argument_group("on this machine (CPU, no cluster)")
    rig.add_argument("--rig", action="store_true", help="start the replicas and routers here")
    rig.add_argument("--replicas", type=int, help="--rig: engine replicas (2-4, default 3; one is killed)")
    rig.add_argument(
        "--no-integrity",
        action="store_true",
        help="--rig: cache.l2.integrity off, to see what changed chunks do",
    )
    rig.add_argument(
        "--backend",
        choices=(tier_rig.LMCACHE, tier_rig.NATIVE),
        help="--rig: cache.backend of the tiered replicas (default lmcache; vllm-native: vLLM's own tiers)",
    )
    parser.set_defaults(func=run)


RELEASE_ONLY = ("--router-url", "--reference-url", "--model", "--tokenizer", "--curvine-namespace")


def _checked(args: argparse.Namespace) -> workload.Mix:
    if not 1 <= args.requests <= 1000:
        raise UserError(f"--requests must be 1-1000, got {args.requests}")
    if not 0 < args.qps < float("inf"):
        raise UserError(f"--qps must be a positive number, got {args.qps}")
    if args.rig:
        given = [flag for flag in RELEASE_ONLY if getattr(args, flag[2:].replace("-", "_"))]
        given += reach.cluster_flags_given(args)
        if given:
            raise UserError(f"--rig starts its own replicas: leave out {', '.join(given)}")
        args.replicas = 3 if args.replicas is None else args.replicas
        if not 2 <= args.replicas <= 4:
            raise UserError(f"--replicas must be 2-4 (one is killed, one must stay), got {args.replicas}")
    elif args.no_integrity or args.replicas is not None or args.backend is not None:
        raise UserError(
            "--no-integrity, --replicas and --backend shape the rig: give --rig, or leave them out"
        )
    bound = args.max_prompt_tokens
    if bound is None:
        bound = experiment.RIG_MAX_PROMPT if args.rig else workload.Mix().max_prompt_tokens
    try:
        return workload.Mix(
            requests=args.requests, max_prompt_tokens=bound, seed=args.seed,
            id_base=0 if args.rig else random.randrange(ID_SPACE),  # a release's L2 outlives runs
        )  # fmt: skip
    except ValueError as error:
        said = str(error).replace("max_prompt_tokens", f"--max-prompt-tokens ({bound})")
        raise UserError(f"the mix: {said}") from None


def run(args: argparse.Namespace) -> int:
    mix = _checked(args)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(f"--out {args.out}: cannot create the results folder ({error.strerror})") from None
    console = Console(stderr=True)

    def log(line: str) -> None:
        console.print(line, markup=False)

    try:
        with tempfile.TemporaryDirectory(prefix="kvtier-soak-") as work:
            rows = _rig(args, mix, Path(work), log) if args.rig else _release(args, mix, Path(work), log)
    except (RigError, kvcheck.CheckError) as error:
        raise UserError(f"the soak stopped: {error}") from None
    (args.out / "soak.json").write_text(json.dumps(rows, indent=2) + "\n")
    if args.output == "json":
        print(json.dumps(rows, indent=2))
    else:
        print(soak.table(rows))
    console.print(f"results: {args.out}/soak.json")
    return exitcodes.OK if soak.clean(rows) else exitcodes.FINDINGS


def _rig(args: argparse.Namespace, mix: workload.Mix, work: Path, log: Log) -> list[dict[str, Any]]:
    chosen = args.faults or [fault for fault in soak.FAULTS if fault not in soak_rig.REFUSED]
    if not args.faults and os.geteuid() != 0:  # every fault the rig can inject: mounting needs root
        chosen = [fault for fault in chosen if fault not in soak_rig.MOUNTED_FAULTS]
        log(f"not root: {', '.join(soak_rig.MOUNTED_FAULTS)} left out (they mount a tmpfs for the L2)")
    return soak_rig.run(
        chosen, mix, args.qps, work, log, replicas=args.replicas, integrity=not args.no_integrity,
        backend=args.backend or tier_rig.LMCACHE,
    )  # fmt: skip


def _release(args: argparse.Namespace, mix: workload.Mix, work: Path, log: Log) -> list[dict[str, Any]]:
    cluster = reach.cluster_from_args(args)
    with ExitStack() as stack:
        reached = reach.reach_from_args(args, stack, every_pod=True, cluster=cluster)
        routers = list(args.router_url) or reached.routers
        subject = soak_release.ReleaseSubject(
            cluster.api, cluster.kube.namespace, cluster.selectors, reached.l2_path, bool(args.router_url),
            _curvine(args, cluster),
        )  # fmt: skip
        chosen = args.faults or [fault for fault in soak.FAULTS if not subject.unsupported(fault)]
        refused = [f"{fault}: {subject.unsupported(fault)}" for fault in chosen if subject.unsupported(fault)]
        if refused:
            raise UserError("against this release, " + "; ".join(refused))
        for url in [*routers, *([args.reference_url] if args.reference_url else [])]:
            kvcheck.http_text(url.rstrip("/") + "/health", timeout=15)  # a wrong URL said now
        model = args.model or bench_run.resolve_model(routers[0])
        key = kvcheck.API_KEY or os.environ.get(reach.API_KEY_ENV)  # as kvtier smoke and bench find it
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        tokenizer = args.tokenizer or model
        offline = Path(tokenizer).is_dir()  # a local tokenizer: vLLM's clients never need the Hub
        # Engines' counters are not read: the pods change under kill-engine and their forwards with them.
        target = driver.Target(routers, model, tokenizer, [], headers, offline)
        plan = soak.plan(chosen, experiment.FreshPrompts(mix))
        reference = driver.Target([args.reference_url or routers[0]], model, tokenizer, [], headers, offline)
        log(f"references: one at a time from {reference.router_urls[0]}")
        return soak_release.run(subject, target, reference, plan, args.qps, work, log)


def _curvine(args: argparse.Namespace, cluster: reach.Cluster) -> soak_release.CurvinePods | None:
    """The L2's Curvine pods when its masters' selector finds any there; None refuses Curvine's faults."""
    masters = cluster.selectors.curvine
    if not masters:
        return None
    pods = soak_release.CurvinePods.from_masters(args.curvine_namespace or cluster.kube.namespace, masters)
    try:
        found = cluster.api().list_namespaced_pod(pods.namespace, label_selector=masters).items
    except Exception as error:  # API errors: forbidden, unknown namespace
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UserError(
            f"cannot list the Curvine masters ({masters!r}) in namespace {pods.namespace}: {first}; "
            "check --curvine-namespace and --curvine-selector"
        ) from None
    return pods if found else None
