"""The options every kvtier command shares, spelled and resolved as kubectl and helm do.

- `-o/--output table|json` on every command that reports.
- `--kubeconfig`, `--context`, `-n/--namespace` on every command that talks to a cluster. The kubeconfig
  is `--kubeconfig`, else `$KUBECONFIG` (a colon-separated list, merged as kubectl merges it: the first
  file to name a context or set current-context wins), else ~/.kube/config; the context is `--context`,
  else the kubeconfig's current one; the namespace is `-n`, else the context's, else "default".
- Old spellings (`--json`, `--kube-context`) still work and say on stderr what replaces them.

Kept free of heavy imports (validate reads its options before it starts Helm): the kubeconfig is read
here with PyYAML, and the Kubernetes client is imported only by `api_client`.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvtier.errors import UserError
from kvtier.inputfiles import read_text

OUTPUTS = ("table", "json")
DEFAULT_NAMESPACE = "default"
DEFAULT_KUBECONFIG = "~/.kube/config"


class Deprecated(argparse.Action):
    """An old spelling: does what `replacement` does and says so on stderr."""

    def __init__(self, option_strings: Sequence[str], dest: str, replacement: str, **kwargs: Any) -> None:
        self.replacement = replacement
        kwargs.setdefault("help", argparse.SUPPRESS)  # the new spelling is the documented one
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        print(
            f"{parser.prog}: warning: {option} is deprecated and will be removed; use {self.replacement}",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


def rates(text: str) -> list[float]:
    """An argparse type: comma-separated positive, finite request rates (`--qps 1,2,4`)."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected request rates like 1,2,4") from None
    if not values or not all(0 < v < math.inf for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive request rates like 1,2,4")
    return values


def http_url(text: str) -> str:
    """An argparse type: a base URL the tools can send HTTP to (`--router-url http://127.0.0.1:8000`)."""
    try:
        parsed = urllib.parse.urlsplit(text)
        parsed.port  # noqa: B018 (reading it checks the port: "http://h:x" raises)
    except ValueError:
        parsed = None
    usable = parsed is not None and parsed.scheme in ("http", "https") and bool(parsed.hostname)
    if not usable or text != text.strip():  # urlsplit drops leading spaces; urllib would not
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an http(s) URL (expected e.g. http://127.0.0.1:8000)"
        )
    return text


def counts(text: str) -> list[int]:
    """An argparse type: comma-separated whole numbers >= 1 (`--replicas 8,16,32`)."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected whole numbers like 8,16,32") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected whole numbers >= 1 like 8,16,32")
    return values


def add_values_layers(parser: argparse.ArgumentParser, files_note: str = "") -> None:
    """-f/--values, --set and --set-string as `helm install` takes them, layered over each environment
    (kvtier.validate.options.Options.overlay applies them in Helm's order)."""
    parser.add_argument(
        "-f",
        "--values",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="a values file layered over each environment, as `helm install -f` (repeatable, in order)"
        + files_note,
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set values as `helm --set` does, after the files (repeatable; a.b=c,list[0]=x,l={a,b})",
    )
    parser.add_argument(
        "--set-string",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="as --set, every value a string (Helm applies these after every --set)",
    )


def add_output(parser: argparse.ArgumentParser, json_alias: bool = True) -> None:
    """`-o/--output table|json`; `--json` (the old flag) as a warned alias of `--output json`."""
    parser.add_argument(
        "-o", "--output", choices=OUTPUTS, default="table", help="report format (default: %(default)s)"
    )
    if json_alias:
        parser.add_argument(
            "--json", dest="output", action=Deprecated, nargs=0, const="json", replacement="--output json"
        )


def add_cluster(
    parser: argparse.ArgumentParser | Any, namespace_help: str = "the release's namespace"
) -> None:
    """`--kubeconfig`, `--context` (old spelling `--kube-context`) and `-n/--namespace`."""
    parser.add_argument(
        "--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)"
    )
    parser.add_argument("--context", help="kubeconfig context (default: the kubeconfig's current context)")
    parser.add_argument("--kube-context", dest="context", action=Deprecated, replacement="--context")
    parser.add_argument(
        "-n", "--namespace", help=f"{namespace_help} (default: the context's namespace, else default)"
    )


@dataclass(frozen=True)
class Kube:
    """Where a command reaches its cluster."""

    kubeconfig: str  # the file, or colon-separated files, the client reads
    context: str
    namespace: str
    given: str | None = None  # --kubeconfig as given (None: from $KUBECONFIG or the default)


def kubeconfig_files(given: str | None, instead: str = "") -> tuple[str, list[Path]]:
    """(what to tell the client, the files that exist): --kubeconfig, $KUBECONFIG, ~/.kube/config.
    `instead`: how else the command can run, for the message when there is no kubeconfig."""
    if given:
        path = Path(given).expanduser()
        if not path.exists():
            raise UserError(f"--kubeconfig {given}: no such file")
        return str(path), [path]
    listed = os.environ.get("KUBECONFIG", "")
    names = [n for n in listed.split(os.pathsep) if n] or [DEFAULT_KUBECONFIG]
    found = [p for p in (Path(n).expanduser() for n in names) if p.exists()]
    if not found:
        where = (
            f"$KUBECONFIG ({listed}) names no existing file"
            if listed
            else f"{DEFAULT_KUBECONFIG} does not exist"
        )
        raise UserError(f"no kubeconfig: {where}; give --kubeconfig FILE or set KUBECONFIG{instead}")
    return os.pathsep.join(str(p) for p in found), found


def _read_kubeconfig(path: Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(read_text(path, "kubeconfig"))
    except yaml.YAMLError as error:
        raise UserError(f"{path}: not a usable kubeconfig (YAML: {str(error).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise UserError(
            f"{path}: not a usable kubeconfig (expected a mapping with contexts, clusters, users)"
        )
    return data


def _contexts(path: Path, data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    listed = data.get("contexts") or []
    if not isinstance(listed, list) or not all(isinstance(c, dict) and c.get("name") for c in listed):
        raise UserError(f"{path}: not a usable kubeconfig (contexts: expected a list of entries with a name)")
    return {str(c["name"]): c.get("context") if isinstance(c.get("context"), dict) else {} for c in listed}


def resolve(args: argparse.Namespace, instead: str = "") -> Kube:
    """The kubeconfig, context and namespace the cluster options name (kubectl's rules)."""
    given = getattr(args, "kubeconfig", None)
    client_path, files = kubeconfig_files(given, instead)
    contexts: dict[str, dict[str, Any]] = {}
    current = ""
    for path in files:
        data = _read_kubeconfig(path)
        for name, context in _contexts(path, data).items():
            contexts.setdefault(name, context)
        current = current or str(data.get("current-context") or "")
    name = getattr(args, "context", None) or current
    shown = ", ".join(sorted(contexts)) or "none"
    if not name:
        raise UserError(f"{client_path}: no current context; give --context NAME (contexts: {shown})")
    if name not in contexts:
        raise UserError(f"--context {name}: no such context in {client_path} (contexts: {shown})")
    namespace = getattr(args, "namespace", None) or str(contexts[name].get("namespace") or DEFAULT_NAMESPACE)
    return Kube(client_path, name, namespace, given)


def offline_namespace(args: argparse.Namespace) -> str:
    """The namespace of a run that reads no kubeconfig: -n, else "default" (as helm without a cluster)."""
    return getattr(args, "namespace", None) or DEFAULT_NAMESPACE


def api_client(kube: Kube) -> Any:
    """The official client's ApiClient for `kube`, or a UserError naming the kubeconfig and context."""
    from kubernetes import config

    try:
        return config.new_client_from_config(config_file=kube.kubeconfig, context=kube.context)
    except Exception as error:  # ConfigException, a missing certificate file, a bad server URL
        raise UserError(
            f"{kube.kubeconfig}: context {kube.context} is not usable ({str(error).splitlines()[0]})"
        ) from None
