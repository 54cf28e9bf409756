"""`kvtier images`: every image a release pulls, for mirroring into an air-gapped registry."""

from __future__ import annotations

import argparse

from kvtier import cliopts

OUTPUTS = ("text", "json", "table")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "images",
        help="list every image a release pulls (hooks, tests, subchart, HyperPod worker), for mirroring",
    )
    p.add_argument(
        "paths",
        nargs="*",
        metavar="VALUES_FILE",
        help="environment values files or directories, each rendered as `helm install -f VALUES_FILE` "
        "(the images of all of them, listed once); none: the chart's defaults",
    )
    cliopts.add_values_layers(p)
    p.add_argument(
        "-o",
        "--output",
        choices=OUTPUTS,
        default="text",
        help="text: one reference a line (default); json: registry, repository, tag, digest and users; table",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kvtier.errors import UserError
    from kvtier.images import listing, report
    from kvtier.validate.inputs import setvalues
    from kvtier.validate.options import Options, collect

    for extra in args.values:
        if not extra.is_file():  # a FIFO would hang Helm's read of it
            problem = (
                "not a regular file (a directory, FIFO or device)"
                if extra.exists()
                else "no such values file"
            )
            raise UserError(f"-f {extra}: {problem}; expected a YAML values file")
    setvalues.check(args.set, args.set_string)  # a malformed --set is a bad option: exit 2
    overlay = Options(values=tuple(args.values), sets=tuple(args.set), set_strings=tuple(args.set_string))
    environments = [[file] for file in collect(args.paths)] if args.paths else [[]]
    images = listing.merged(
        listing.release_images(listing.UMBRELLA, environment, overlay.overlay())
        for environment in environments
    )
    if args.output == "json":
        print(report.to_json(images))
    elif args.output == "table":
        report.print_table(images)
    else:
        print(report.text(images), end="")
    return 0
