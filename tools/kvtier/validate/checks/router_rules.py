"""The rendered vllm-router arguments, read by vllm-router's own argument parser.

The umbrella chart renders one vllm-router Deployment per model (templates/router-deployment.yaml,
`command: ["vllm-router"]`); its args are templates/_router.tpl routerArgs: the chart's own flags (listen
address, --policy from routing.strategy, metrics, discovery or worker list, KV events, --api-key), then
router.extraArgs verbatim. vllm-router's entry point (vllm_router/launch_router.py main, PyPI vllm-router,
toolchain/versions.env VLLM_ROUTER_VERSION) parses them with parse_router_args, an argparse parser that
prints a usage error and exits 2 on an unknown flag or a bad value (and exits 0 after --help);
launch_router then runs RouterArgs._validate_router_args before it starts, which raises on a few
combinations. Either way the pod
exits and crash-loops. This rule runs the same two steps in-process on every rendered router container,
with argparse's output captured (nothing reaches the user's terminal and nothing is started). `$(VAR)`
references stay as text: the kubelet expands them only at start, so a refusal of one is a warning.

The parser is the toolkit venv's vllm_router (toolchain/install.sh installs the pinned version). When it is
not importable, or another version is installed, the rule yields nothing, like validate's other layers
whose tool is missing.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kvtier import toolchain
from kvtier.manifests import containers, pod_templates, subject
from kvtier.validate.findings import Severity
from kvtier.validate.rules import Hit, ManifestsContext, rule

COMMAND = "vllm-router"
# The flags _router.tpl renders before router.extraArgs, in the order it renders them, with how many
# values follow each ("*": every item up to the next flag). Every mode renders a subsequence of this.
CHART_FLAGS: tuple[tuple[str, int | str], ...] = (
    ("--host", 1),
    ("--port", 1),
    ("--policy", 1),
    ("--prometheus-host", 1),
    ("--prometheus-port", 1),
    ("--worker-urls", "*"),
    ("--service-discovery", 0),
    ("--selector", "*"),
    ("--service-discovery-namespace", 1),
    ("--service-discovery-port", 1),
    ("--kv-event-source", 1),  # once per replica or worker
    ("--kv-event-model", 1),
    ("--kv-event-block-size", 1),
    ("--api-key", 1),
)
REPEATED = {"--kv-event-source"}
# Where the user sets what each chart flag carries: the remedy when router.extraArgs overrides one.
CHART_KEYS = {
    "--host": "nothing (the router listens on every address, for its Service)",
    "--port": "router.port (the Service and the probes use it too)",
    "--policy": "routing.strategy",
    "--prometheus-host": "nothing (the metrics listen on every address, for the ServiceMonitor)",
    "--prometheus-port": "router.metricsPort (the metrics Service and ServiceMonitor use it too)",
    "--worker-urls": "router.discovery.staticWorkers",
    "--service-discovery": "router.discovery.mode",
    "--selector": "nothing (the chart selects this release's engines of the model)",
    "--service-discovery-namespace": "nothing (the router's Role reads the release namespace only)",
    "--service-discovery-port": "engine.port",
    "--kv-event-source": "router.discovery.staticWorkers[].kvEvents",
    "--kv-event-model": "the model's `model`",
    "--kv-event-block-size": "the model's --block-size in its extraArgs",
    "--api-key": "auth.apiKeySecret",
}
_ORDER = {flag: n for n, (flag, _) in enumerate(CHART_FLAGS)}
_ARITY = dict(CHART_FLAGS)
_FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


@dataclass(frozen=True)
class Refusal:
    error: str  # vllm-router's own words
    flag: str  # the flag it names ("" when it names none)


Parse = Callable[[list[str]], Any]


@functools.cache
def _parser() -> tuple[Parse, str] | None:
    """(parse_router_args, version) of the installed vllm-router, if it is the pinned one."""
    try:
        with _quiet():
            from vllm_router.launch_router import parse_router_args
            from vllm_router.version import __version__
    except Exception:  # not installed, or a dependency missing or broken: no judgement
        return None
    pinned = toolchain.versions().get("VLLM_ROUTER_VERSION")
    if pinned and str(__version__) != pinned:
        return None  # another release's parser would judge other flags
    return parse_router_args, str(__version__)


@contextlib.contextmanager
def _quiet() -> Iterator[io.StringIO]:
    """argparse's usage and help, and vllm-router's log lines, into a buffer instead of the terminal."""
    sink = io.StringIO()
    disabled = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with contextlib.redirect_stderr(sink), contextlib.redirect_stdout(io.StringIO()):
            yield sink
    finally:
        logging.disable(disabled)


def refusal(parse: Parse, argv: list[str]) -> Refusal | None:
    """What vllm-router says of `argv` before it starts serving: None when it accepts them."""
    with _quiet() as sink:
        try:
            parsed = parse(list(argv))
            validate = getattr(parsed, "_validate_router_args", None)
            if callable(validate):
                validate()  # launch_router runs it before Router.from_args
        except SystemExit as stop:
            if stop.code in (0, None):
                return Refusal("prints its help or version and exits without serving", _help_flag(argv))
            text = sink.getvalue().strip().splitlines()
            error = text[-1].split(": error: ", 1)[-1] if text else f"exit status {stop.code}"
            return Refusal(error, _named_flag(error, argv))
        except (ValueError, TypeError) as problem:
            return Refusal(str(problem), _named_flag(str(problem), argv))
    return None


def _help_flag(argv: list[str]) -> str:
    return next((a for a in argv if a in ("-h", "--help") or ("--help".startswith(a) and len(a) > 3)), "")


def _named_flag(error: str, argv: list[str]) -> str:
    """The flag an error names: `argument --x:`, `ambiguous option: --x`, the first unrecognized item, or a
    RouterArgs field (kv_aware_session_affinity_ttl_secs -> --kv-aware-session-affinity-ttl-secs)."""
    head, _, rest = error.partition(": ")
    if head == "unrecognized arguments":
        items = rest.split()
        return next((i.split("=", 1)[0] for i in items if i.startswith("-")), items[0] if items else "")
    found = _FLAG.search(error)
    if found:
        return found.group(1).split("/", 1)[0]
    for word in re.findall(r"[a-z]+(?:_[a-z0-9]+)+", error):
        flag = "--" + word.replace("_", "-")
        if any(a.split("=", 1)[0] == flag for a in argv):
            return flag
    if "bootstrap port" in error:
        return "--prefill"
    return ""


def chart_end(argv: list[str]) -> int:
    """How many leading items are the chart's own flags (the rest is router.extraArgs): the longest prefix
    that follows CHART_FLAGS' order, each flag once (--kv-event-source repeated) with its values."""
    i, last = 0, -1
    while i < len(argv) and argv[i] in _ORDER:
        at = _ORDER[argv[i]]
        if at < last or (at == last and argv[i] not in REPEATED):
            break
        last, arity = at, _ARITY[argv[i]]
        i += 1
        if arity == "*":
            while i < len(argv) and not argv[i].startswith("-"):
                i += 1
        else:
            i += int(arity)
    return min(i, len(argv))


def _mentions(item: str, flag: str) -> bool:
    """Whether an argv item spells `flag` (argparse takes unambiguous prefixes and `--flag=value`)."""
    if item == flag:
        return bool(flag)
    name = item.split("=", 1)[0]
    return bool(flag) and name.startswith("-") and len(name) > 2 and (name == flag or flag.startswith(name))


def router_argvs(ctx: ManifestsContext) -> Iterator[tuple[dict[str, Any], dict[str, Any], list[str], int]]:
    """(manifest, container, arguments, how many of them are in `command` after vllm-router) of every
    rendered container that runs vllm-router."""
    for m, _, spec in pod_templates(ctx.manifests):
        for _, _, c in containers(spec):
            command = [str(a) for a in c.get("command") or []]
            if command and command[0].rsplit("/", 1)[-1] == COMMAND:
                yield m, c, command[1:] + [str(a) for a in c.get("args") or []], len(command) - 1


def overridden(parse: Parse, argv: list[str], end: int) -> Iterator[tuple[str, Any, Any]]:
    """(flag, chart's value, effective value) of each chart flag whose value router.extraArgs change, as
    vllm-router's own parser reads both argvs: the last repeat wins, in any spelling argparse takes (an
    unambiguous prefix, `--flag=value`). Nothing when either argv does not parse (router-args-parse)."""
    with _quiet():
        try:
            chart, full = parse(list(argv[:end])), parse(list(argv))
        except (SystemExit, ValueError, TypeError):
            return
    for flag in dict.fromkeys(a for a in argv[:end] if a in _ORDER):
        field = flag[2:].replace("-", "_")
        if hasattr(chart, field) and getattr(chart, field) != getattr(full, field, None):
            yield flag, getattr(chart, field), getattr(full, field, None)


@rule(
    "router-args-reserved",
    scope="manifests",
    reason="router.extraArgs come after the chart's own router flags and vllm-router's parser keeps the last "
    "value: a second --port, --policy or discovery flag (in any spelling it takes) silently replaces the "
    "chart's, while the Service, the probes, the metrics scrape and the routing settings keep the chart's",
    remedy="remove the flag from router.extraArgs and set the chart key that renders it",
)
def router_args_reserved(ctx: ManifestsContext) -> Iterator[Hit]:
    found = _parser()
    if found is None:
        return
    parse, version = found
    for m, c, argv, lead in router_argvs(ctx):
        end = chart_end(argv)
        for flag, chart, effective in overridden(parse, argv, end):
            extra = argv[end:]
            at = next((j for j, item in reversed(list(enumerate(extra))) if _mentions(item, flag)), 0)
            yield Hit(
                f"{subject(m)} container {c.get('name')}: router.extraArgs[{at}] {extra[at]!r} overrides the "
                f"chart's {flag} ({chart!r} becomes {effective!r} in vllm-router {version}); set "
                f"{CHART_KEYS.get(flag, 'the chart key that renders it')} instead",
                subject=subject(m),
                manifest_path=f"spec.template.spec.containers[{c.get('name')}].args[{end + at - lead}]",
            )


@rule(
    "router-args-parse",
    scope="manifests",
    reason="vllm-router parses its arguments with its own argparse parser and exits on an unknown flag or a "
    "bad value (vllm_router/launch_router.py parse_router_args, then RouterArgs._validate_router_args): "
    "every router pod crash-loops and no request reaches the engines",
    remedy="pass in router.extraArgs only flags and values the pinned vllm-router accepts "
    "(`vllm-router --help`); the routing policy comes from routing.strategy, discovery from router.discovery",
)
def router_args_parse(ctx: ManifestsContext) -> Iterator[Hit]:
    found = _parser()
    if found is None:
        return
    parse, version = found
    for m, c, argv, lead in router_argvs(ctx):
        wrong = refusal(parse, argv)
        if wrong is None:
            continue
        who = f"{subject(m)} container {c.get('name')}"
        end = chart_end(argv)
        own = refusal(parse, argv[:end]) if end < len(argv) else wrong
        severity: Severity = "warning" if "$(" in wrong.error else "error"
        later = " (a $(VAR) reference, expanded only when the pod starts)" if severity == "warning" else ""
        extra = argv[end:]
        index = next((j for j, item in enumerate(extra) if _mentions(item, wrong.flag)), None)
        if own is None and extra:
            at = index if index is not None else 0
            spot = f"router.extraArgs[{at}] {extra[at]!r}"
            fix = "remove it or use a flag vllm-router has"
            yield Hit(
                f"{who}: vllm-router {version} refuses {spot}{later}: {wrong.error}; {fix}",
                subject=subject(m),
                manifest_path=f"spec.template.spec.containers[{c.get('name')}].args[{end + at - lead}]",
                severity=severity,
            )
        else:
            flag = f" ({wrong.flag})" if wrong.flag else ""
            yield Hit(
                f"{who}: vllm-router {version} refuses the chart's own router flags{flag}{later}: "
                f"{wrong.error}; they come from routing.strategy, router.* and router.discovery "
                "(templates/_router.tpl)",
                subject=subject(m),
                manifest_path=f"spec.template.spec.containers[{c.get('name')}].args",
                severity=severity,
            )
