"""`kvtier validate`: schema, rules, Helm 3/4 renders, Kubernetes schemas, config files, policy."""

from __future__ import annotations

import argparse

from kvtier import helm
from kvtier.validate import engine, kube, report
from kvtier.validate.podsecurity import LEVELS


def _minors(text: str) -> tuple[str, ...]:
    """ "1.30-1.35" or "1.30,1.32" -> the minors, each one kubernetes-validate has schemas for."""
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
    if level not in LEVELS or not namespace:
        raise argparse.ArgumentTypeError(f"expected NAMESPACE=LEVEL with LEVEL one of {', '.join(LEVELS)}")
    return namespace, level


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("validate", help="check environment values files end to end (default: values/)")
    p.add_argument(
        "paths", nargs="*", metavar="FILE|DIR", help="values files or directories (default: values/)"
    )
    p.add_argument("--output", choices=("table", "json"), default="table", help="report format")
    p.add_argument("--no-render", action="store_true", help="only the schema and rules layers (no Helm)")
    p.add_argument("--helm", default="3,4", help="Helm majors to render with (default 3,4)")
    p.add_argument(
        "--kube-versions",
        type=_minors,
        default=kube.DEFAULT_MINORS,
        help="Kubernetes minors whose schemas the renders must pass (default 1.30-1.35)",
    )
    p.add_argument("--release", default="kvtier", help="release name used to render (and to look up)")
    p.add_argument("--namespace", default="kvtier", help="release namespace")
    p.add_argument("--kube-context", help="compare with the release deployed in this kubeconfig context")
    p.add_argument("--kubeconfig", help="kubeconfig file for --kube-context")
    p.add_argument(
        "--pod-security",
        type=_level,
        action="append",
        default=[],
        metavar="NAMESPACE=LEVEL",
        help="Pod Security level a namespace enforces (restricted|baseline|privileged)",
    )
    p.add_argument("--jobs", type=int, default=engine.Options.jobs, help="parallel Helm renders")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    majors = helm.majors(args.helm)
    options = engine.Options(
        render=not args.no_render,
        helm_majors=majors,
        minors=args.kube_versions,
        release=args.release,
        namespace=args.namespace,
        kube_context=args.kube_context,
        kubeconfig=args.kubeconfig,
        pod_security=dict(args.pod_security),
        jobs=max(args.jobs, 1),
    )
    reports = engine.validate(engine.collect(args.paths), options)
    code = engine.exit_code(reports)
    if args.output == "json":
        print(report.to_json(reports, code))
    else:
        report.print_human(reports)
    return code
