"""`kvtier validate`: schema, rules, Helm 3/4 renders, Kubernetes schemas, config files, policy.

Helm is started before the checkers are imported (jsonschema, LMCache's loader: ~0.2 s of CPU), so
the renders use the cores that importing leaves idle. Hence the late imports in `run`.
"""

from __future__ import annotations

import argparse
import gc
import os
from pathlib import Path

from kvtier import cliopts, helm
from kvtier.errors import UserError
from kvtier.validate.inputs import setvalues
from kvtier.validate.layers import render
from kvtier.validate.options import (
    CLUSTER_DEFAULT,
    CLUSTER_ENV,
    DEFAULT_MINORS,
    IDLE_DEFAULT_S,
    IDLE_ENV,
    OFFLINE_ENV,
    POD_SECURITY_LEVELS,
    Options,
    collect,
)


def _minors(text: str) -> tuple[str, ...]:
    """ "1.30-1.35" or "1.30,1.32" -> the minors, each one kubernetes-validate has schemas for."""
    from kvtier.validate.layers import kube

    available = kube.available_minors()
    if "-" in text:
        low, high = (tuple(map(int, v.split("."))) for v in text.split("-", 1))
        chosen = [v for v in available if low <= tuple(map(int, v.split("."))) <= high]
    else:
        chosen = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in available]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"no schemas for {unknown or text}; available: {', '.join(available)}"
        )
    return tuple(chosen)


def _level(text: str) -> tuple[str, str]:
    namespace, _, level = text.partition("=")
    if level not in POD_SECURITY_LEVELS or not namespace:
        levels = ", ".join(POD_SECURITY_LEVELS)
        raise argparse.ArgumentTypeError(f"expected NAMESPACE=LEVEL with LEVEL one of {levels}")
    return namespace, level


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("validate", help="check environment values files end to end (default: values/)")
    p.add_argument(
        "paths", nargs="*", metavar="FILE|DIR", help="values files or directories (default: values/)"
    )
    cliopts.add_values_layers(p, "; without FILE|DIR the first one is the environment")
    cliopts.add_output(p, json_alias=False)
    p.add_argument("--no-render", action="store_true", help="only the schema and rules layers (no Helm)")
    p.add_argument(
        "--list-rules",
        action="store_true",
        help="print every cross-field and policy rule (id, why, fix) and exit",
    )
    p.add_argument("--helm", default="3,4", help="Helm majors to render with (default 3,4)")
    p.add_argument(
        "--kube-versions",
        type=_minors,
        default=DEFAULT_MINORS,
        help="Kubernetes minors whose schemas the renders must pass (default 1.30-1.35)",
    )
    p.add_argument("--release", default="kvtier", help="release name used to render (and to look up)")
    cluster = p.add_argument_group(
        "a cluster (only with --context or --kubeconfig: then the deployed release is compared, and "
        "--server judges there; without them nothing reads a kubeconfig)"
    )
    cliopts.add_cluster(cluster, "the release's namespace (without a cluster: default)")
    judges = p.add_mutually_exclusive_group()
    judges.add_argument(
        "--server",
        action="store_true",
        help="insist on the API server's dry run (the default does it where one can be had, and says "
        "when none could): the --context cluster, else the local control plane",
    )
    judges.add_argument(
        "--offline",
        action="store_true",
        help=f"no API server: by default every rendered object is dry-run (server-side apply, dryRun=All) "
        f"on the --context cluster, else on the local control plane when `make cluster-tools` built it "
        f"(started once, kept up ${IDLE_ENV} s idle, default {IDLE_DEFAULT_S}; named ${CLUSTER_ENV}, "
        f"default {CLUSTER_DEFAULT}); ${OFFLINE_ENV}=1 does the same",
    )
    p.add_argument(
        "--vllm",
        action="store_true",
        help="parse every engine's vllm serve args with the pinned vLLM in the engine venv (make engine)",
    )
    p.add_argument(
        "--pod-security",
        type=_level,
        action="append",
        default=[],
        metavar="NAMESPACE=LEVEL",
        help="Pod Security level a namespace enforces (restricted|baseline|privileged)",
    )
    p.add_argument(
        "--model-config",
        action="append",
        default=[],
        metavar="[MODEL=]PATH",
        help="a model's Hugging Face config.json, or its folder (with model.safetensors.index.json for the "
        "weight bytes), for the rules that need its heads, context, dtype and size; MODEL= names the "
        "models[].model it describes, without it every model validate has no facts for (repeatable)",
    )
    p.add_argument("--jobs", type=int, default=Options.jobs, help="parallel Helm renders")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # A run allocates a great many acyclic objects (parsed YAML and schemas): the cycle collector's
    # passes free nothing and cost ~5% of the wall time (farm-bench, paired); the peak grows ~1 MiB.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _run(args)
    finally:
        if was_enabled:
            gc.enable()


def _list_rules(output: str) -> int:
    from kvtier.validate import catalogue, report

    listed = catalogue.listing()
    if output == "json":
        print(report.rules_json(listed))
    else:
        report.print_rules(listed)
    return 0


def _environments(paths: list[str], values: list[Path]) -> tuple[list[Path], tuple[Path, ...]]:
    """(the environments, the -f files layered over each): without FILE|DIR, the first -f file is the
    one environment (`helm install -f a.yaml -f b.yaml`)."""
    for extra in values:
        if not extra.is_file():
            raise UserError(f"-f {extra}: no such values file")
    if values and not paths:
        return [values[0]], tuple(values[1:])
    return collect(paths), tuple(values)


def _server(args: argparse.Namespace) -> bool | None:
    """--server: True; --offline (or its environment variable): False; else the default, None."""
    if args.server:
        return True
    offline = os.environ.get(OFFLINE_ENV, "")
    if args.offline or offline not in ("", "0"):
        return False
    return None


def _run(args: argparse.Namespace) -> int:
    if args.list_rules:
        return _list_rules(args.output)
    majors = helm.majors(args.helm)
    # A cluster only when one is named: a plain run stays offline and reads no kubeconfig.
    kube = cliopts.resolve(args) if args.context or args.kubeconfig else None
    options = Options(
        render=not args.no_render,
        helm_majors=majors,
        minors=args.kube_versions,
        release=args.release,
        namespace=kube.namespace if kube else cliopts.offline_namespace(args),
        kube_context=kube.context if kube else None,
        kubeconfig=kube.kubeconfig if kube else None,
        pod_security=dict(args.pod_security),
        jobs=max(args.jobs, 1),
        server=_server(args),
        vllm=args.vllm,
    )
    if (options.server or options.vllm) and not options.render:
        raise UserError("--server and --vllm judge the rendered objects: drop --no-render")
    if not options.render:
        options.server = False
    files, options.values = _environments(args.paths, args.values)
    options.sets, options.set_strings = tuple(args.set), tuple(args.set_string)
    from kvtier.validate import model_facts

    options.model_configs = tuple(model_facts.parse_flag(text) for text in args.model_config)
    setvalues.check(options.sets, options.set_strings)  # a malformed --set is a bad option: exit 2
    started = None
    if options.render:
        started = render.start(
            files,
            majors,
            options.release,
            options.namespace,
            options.kube_version,
            options.jobs,
            options.overlay(),
        )
    from kvtier.validate import pipeline, report

    reports = pipeline.validate(files, options, started)
    code = pipeline.exit_code(reports)
    if args.output == "json":
        print(report.to_json(reports, code))
    else:
        report.print_human(reports)
    return code
