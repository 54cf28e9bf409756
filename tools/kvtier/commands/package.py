"""`kvtier package`: package both charts at their Chart.yaml versions and push them to an OCI registry."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from kvtier import cliopts, exitcodes, paths
from kvtier.errors import UserError
from kvtier.publish import package
from kvtier.publish.registry import Registry
from kvtier.publish.signing import PASSPHRASE_ENV, Signer, signer


def _chart(name: str) -> str:
    if not name.strip():
        raise argparse.ArgumentTypeError(
            "an empty chart name; give a folder name under charts/ (e.g. curvine)"
        )
    return name


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "package",
        help="package the charts and push them to an OCI registry (never overwrites a version)",
        description="Build dependencies, package (with --sign: sign) every chart at its Chart.yaml "
        "version and `helm push` it. Credentials: a previous `helm registry login`, or --username with "
        "--password-stdin (or KVTIER_REGISTRY_USERNAME / KVTIER_REGISTRY_PASSWORD).",
    )
    parser.add_argument(
        "--registry",
        default=os.environ.get("KVTIER_REGISTRY"),
        help="oci://HOST[:PORT]/PATH to push to (env KVTIER_REGISTRY)",
    )
    parser.add_argument(
        "--chart", type=_chart, action="append", help="publish only this chart (repeatable; default: all)"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="check, package and look up the registry, but push nothing"
    )
    parser.add_argument(
        "--username", default=os.environ.get("KVTIER_REGISTRY_USERNAME"), help="registry user"
    )
    parser.add_argument(
        "--password-stdin",
        action="store_true",
        help="read the password or token from stdin (else KVTIER_REGISTRY_PASSWORD)",
    )
    parser.add_argument(
        "--registry-config", type=Path, help="Helm registry config holding credentials (default: Helm's own)"
    )
    parser.add_argument(
        "--plain-http", action="store_true", help="HTTP instead of TLS (loopback registries only)"
    )
    parser.add_argument(
        "--helm", type=int, choices=(3, 4), default=3, help="pinned Helm major to use (default 3)"
    )
    parser.add_argument(
        "--destination", type=Path, default=paths.ROOT / "dist" / "charts", help="where the .tgz files go"
    )
    signing = parser.add_argument_group(
        "signing (Helm's provenance: a .prov beside each package, pushed with it)",
        f"The passphrase of a protected key: --passphrase-file, else ${PASSPHRASE_ENV}.",
    )
    signing.add_argument("--sign", action="store_true", help="sign each package with a PGP private key")
    signing.add_argument(
        "--key", help="name or e-mail in the signing key's user ID (as `helm package --key`)"
    )
    signing.add_argument(
        "--keyring", type=Path, help="binary secret keyring holding the key (gpg --export-secret-keys)"
    )
    signing.add_argument(
        "--passphrase-file", metavar="FILE", help="file whose first line is the key's passphrase; - for stdin"
    )
    signing.add_argument(
        "--sign-key-url",
        metavar="URL",
        help="https URL of the public key, written with the key's fingerprint into artifacthub.io/signKey",
    )
    cliopts.add_output(parser, json_alias=False)
    parser.set_defaults(func=run)


def _signer(args: argparse.Namespace) -> Signer | None:
    given = [f for f in ("key", "keyring", "passphrase_file", "sign_key_url") if getattr(args, f)]
    if not args.sign:
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise UserError(f"{flag} is only used with --sign; add --sign to sign the packages")
        return None
    if args.passphrase_file == "-" and args.password_stdin:
        raise UserError(
            "--passphrase-file - and --password-stdin both read stdin; put the passphrase in a file "
            f"or in ${PASSPHRASE_ENV}, or the registry password in KVTIER_REGISTRY_PASSWORD"
        )
    return signer(args.key, args.keyring, args.passphrase_file, args.sign_key_url)


def run(args: argparse.Namespace) -> int:
    registry = (
        Registry(args.registry, args.plain_http, args.registry_config, args.helm) if args.registry else None
    )
    signing = _signer(args)
    password = sys.stdin.read().strip() if args.password_stdin else os.environ.get("KVTIER_REGISTRY_PASSWORD")
    charts = package.discover(args.chart)
    outcomes, findings = package.publish(
        charts,
        registry,
        args.destination,
        dry_run=args.dry_run,
        username=args.username,
        password=password,
        signing=signing,
        helm_major=args.helm,
    )
    for finding in findings:
        print(finding, file=sys.stderr)
    if args.output == "json":
        rows = [{**dataclasses.asdict(o), "package": str(o.package)} for o in outcomes]
        problems = [
            {"rule": f.rule, "file": str(f.path), "line": f.line, "message": f.message} for f in findings
        ]
        print(json.dumps({"charts": rows, "findings": problems}, indent=2))
    elif outcomes:
        width = max(len(o.chart) for o in outcomes)
        for o in outcomes:
            where = o.reference or str(o.package)
            print(f"{o.chart:<{width}}  {o.version:<10}  {o.action:<10}  {where}  {o.digest}".rstrip())
    if findings:
        print("nothing was pushed", file=sys.stderr)
        return exitcodes.FINDINGS
    return exitcodes.OK
