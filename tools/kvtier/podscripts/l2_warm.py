#!/usr/bin/env python3
"""Warms a model's shared L2 with listed prefixes before traffic, then proves another replica loads them.

Run by the umbrella chart's post-install/post-upgrade hook Job (from the podscripts ConfigMap, on the engine
image's Python, with the L2 claim mounted) and imported by `kvtier warm` and the warm-up benchmark.
Standard library only; Python >= 3.9.

    python3 l2_warm.py --prefixes FILE --model M (--service HOST --port P | --replica URL ...)
        --namespace-dir DIR --chunk-tokens 256 [--min-replicas 2] [--pin] [--on-failure fail|warn]
        [--timeout 900] [--write-timeout 120]

For each prefix, one at a time:
1. its tokens, by replica A's own tokenizer (vLLM's /tokenize): a text as a completion prompt would be
   tokenized, chat messages through the model's chat template without a generation prompt (the part every
   later conversation that starts with those messages shares);
2. a one-token completion of exactly those token ids on A (with the prefix's cache salt, if any): A
   computes the prefill and its KV connector stores every whole chunk to L2;
3. the chunk files that request wrote, once final in the model's namespace directory (no temp file left,
   at least as many new final files as whole chunks);
4. the same token ids on replica B: B's own counter of KV-connector hit tokens must cover every whole chunk
   (the last token is always computed, so `(tokens - 1) // chunk` chunks). That is the proof: B never
   computed the prefix, so the hit came from the shared tier;
5. with `--pin`, the files of step 3 are recorded in `<namespace>/.kvtier-warm/<prefix>.json`; the eviction
   job (l2_evict.py --pins) never removes them while the chart still lists the prefix.

Prints a table and one JSON line (`{"check": "l2-warm", "ok", "summary", "prefixes": [...]}`); exits 0 when
every prefix was verified (or with `--on-failure warn`), 1 when one was not, 2 on bad arguments or input.
The summary also goes to the container's termination message, so `kubectl describe` and a failed
`helm install` show why.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import socket
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

if __package__:  # imported as kvtier.podscripts.l2_warm (the toolkit, the tests)
    from . import kvcheck
    from .l2_scan import PIN_DIR, PREFIX_NAME, TEMP_SUFFIX, is_chunk_file
else:  # run as a script from the pod's ConfigMap folder, beside kvcheck.py and l2_scan.py
    import kvcheck  # type: ignore[no-redef]
    from l2_scan import PIN_DIR, PREFIX_NAME, TEMP_SUFFIX, is_chunk_file  # type: ignore[no-redef]

OK, FAILED, USAGE = 0, 1, 2
TERMINATION_LOG = "/dev/termination-log"  # the kubelet shows it as the container's termination message
POLL_S = 0.25


class WarmError(Exception):
    """Bad input or an endpoint that cannot be used: the message says which and what to do."""


# --- Prefixes ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prefix:
    """One listed prefix: exactly one of text, messages (chat) or file (a ConfigMap key mounted as a file)."""

    name: str
    text: str | None = None
    messages: list[dict[str, Any]] | None = None
    file: str | None = None
    cache_salt: str | None = None

    def describe(self) -> str:
        if self.messages is not None:
            return f"{len(self.messages)} chat messages"
        if self.file is not None:
            return f"file {self.file}"
        return f"text of {len(self.text or '')} characters"


def load_prefixes(path: str) -> list[Prefix]:
    """The prefixes file: `{"prefixes": [{"name": ..., "text" | "messages" | "file": ..., "cacheSalt": ...}]}`
    (the chart renders it from cache.warmup.prefixes.<model>)."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as error:
        raise WarmError(f"--prefixes {path}: {error.strerror}") from None
    except ValueError as error:
        raise WarmError(f"--prefixes {path}: not JSON ({error})") from None
    entries = data.get("prefixes") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise WarmError(f'--prefixes {path}: expected {{"prefixes": [...]}}')
    if not entries:
        raise WarmError(f"--prefixes {path}: no prefix listed")
    return parse_prefixes(entries, f"{path}: prefixes")


def parse_prefixes(entries: list[Any], where_base: str) -> list[Prefix]:
    """Prefixes from their entries; `where_base` names them in errors (`<file>: prefixes`)."""
    prefixes, seen = [], set()
    for index, entry in enumerate(entries):
        where = f"{where_base}[{index}]"
        if not isinstance(entry, dict):
            raise WarmError(f"{where}: expected an object with name and one of text, messages, file")
        name = entry.get("name")
        if not isinstance(name, str) or not PREFIX_NAME.fullmatch(name):
            raise WarmError(
                f"{where}: name {name!r}: expected 1-63 letters, digits, '-', '_' or '.', starting and "
                "ending with a letter or digit"
            )
        if name in seen:
            raise WarmError(f"{where}: name {name!r} is listed twice")
        seen.add(name)
        given = [key for key in ("text", "messages", "file") if entry.get(key) is not None]
        if len(given) != 1:
            raise WarmError(
                f"{where} ({name}): expected exactly one of text, messages, file; got {given or 'none'}"
            )
        messages = entry.get("messages")
        if messages is not None and (
            not isinstance(messages, list)
            or not messages
            or not all(isinstance(m, dict) and "role" in m for m in messages)
        ):
            raise WarmError(f"{where} ({name}): messages must be a list of {{role, content}} objects")
        salt = entry.get("cacheSalt")
        if salt is not None and (not isinstance(salt, str) or not salt):
            raise WarmError(f"{where} ({name}): cacheSalt must be a non-empty string")
        unknown = sorted(set(entry) - {"name", "text", "messages", "file", "cacheSalt"})
        if unknown:
            raise WarmError(
                f"{where} ({name}): unknown key {unknown[0]!r} (expected text, messages, file, cacheSalt)"
            )
        prefixes.append(Prefix(name, entry.get("text"), messages, entry.get("file"), salt))
    return prefixes


def prefix_text(prefix: Prefix) -> str | None:
    """The prefix's text (a file is read now: a missing ConfigMap key is this prefix's failure)."""
    if prefix.file is None:
        return prefix.text
    try:
        with open(prefix.file, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise WarmError(
            f"{prefix.file} does not exist: the ConfigMap or key it comes from is missing "
            "(cache.warmup.prefixes.<model>.<prefix>.configMap: create it, then `helm upgrade` or "
            "`kvtier warm`)"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise WarmError(f"{prefix.file}: cannot read it as UTF-8 text ({error})") from None
    if not text.strip():
        raise WarmError(f"{prefix.file} is empty")
    return text


# --- The engine: tokens, requests, counters --------------------------------------------------------


def token_ids(url: str, model: str, prefix: Prefix, timeout: float) -> list[int]:
    """The prefix's token ids by the engine's own tokenizer (and chat template, for messages)."""
    endpoint = url.rstrip("/") + "/tokenize"
    if prefix.messages is not None:
        body: dict[str, Any] = {"model": model, "messages": prefix.messages, "add_generation_prompt": False}
    else:
        body = {"model": model, "prompt": prefix_text(prefix)}
    try:
        answer = kvcheck.http_json(endpoint, body, timeout)
    except kvcheck.CheckError as error:
        hint = " (does the model have a chat template?)" if prefix.messages is not None else ""
        raise WarmError(f"tokenizing {prefix.name}: {error}{hint}") from None
    tokens = answer.get("tokens") if isinstance(answer, dict) else None
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
        raise WarmError(f"POST {endpoint}: no token list in the answer: {str(answer)[:200]}")
    return tokens


def complete(url: str, model: str, tokens: list[int], salt: str | None, timeout: float) -> None:
    """A one-token greedy completion of exactly these token ids (no re-tokenization on the way)."""
    body: dict[str, Any] = {"model": model, "prompt": tokens, "max_tokens": 1, "temperature": 0}
    if salt:
        body["cache_salt"] = salt
    try:
        kvcheck.http_json(url.rstrip("/") + "/v1/completions", body, timeout)
    except kvcheck.CheckError as error:
        raise WarmError(str(error)) from None


def hits(url: str, timeout: float) -> tuple[float, float]:
    """(L0 prefix-cache hit tokens, KV-connector hit tokens) counters of one engine."""
    try:
        metrics = kvcheck.read_metrics(kvcheck.metrics_url(url), timeout)
    except kvcheck.CheckError as error:
        raise WarmError(str(error)) from None
    connector_name, connector = kvcheck.first_metric(metrics, kvcheck.EXTERNAL_HIT_METRICS)
    if connector_name is None:
        names = " or ".join(kvcheck.EXTERNAL_HIT_METRICS)
        raise WarmError(f"{url}/metrics has no {names}: is the KV connector (cache.l1/l2) enabled?")
    return kvcheck.first_metric(metrics, kvcheck.L0_HIT_METRICS)[1], connector


def served(url: str, model: str, tokens: list[int], salt: str | None, timeout: float) -> tuple[int, int]:
    """Send the tokens to one replica; (L0 hit tokens, connector hit tokens) it reported for them."""
    l0_before, connector_before = hits(url, timeout)
    complete(url, model, tokens, salt, timeout)
    l0_after, connector_after = hits(url, timeout)
    return int(l0_after - l0_before), int(connector_after - connector_before)


# --- Replicas ------------------------------------------------------------------------------------


def resolve(service: str, port: int) -> list[str]:
    """The ready replicas behind a headless Service: its DNS answer lists each ready pod's address."""
    try:
        answers = socket.getaddrinfo(service, port, socket.AF_INET, socket.SOCK_STREAM)
    except socket.gaierror:
        return []
    return sorted({f"http://{answer[4][0]}:{port}" for answer in answers})


def healthy(url: str, timeout: float = 5.0) -> bool:
    try:
        kvcheck.http_text(url.rstrip("/") + "/health", timeout)
    except kvcheck.CheckError:
        return False
    return True


def wait_for_replicas(
    find: Callable[[], list[str]], wanted: int, deadline: float, log: Callable[[str], None]
) -> list[str]:
    """At least `wanted` healthy replicas, or WarmError at the deadline saying how many answered."""
    said = -1
    while True:
        ready = [url for url in find() if healthy(url)]
        if len(ready) >= wanted:
            return ready
        if len(ready) != said:
            log(f"{len(ready)} of {wanted} replicas ready; waiting")
            said = len(ready)
        if time.monotonic() >= deadline:
            raise WarmError(
                f"{len(ready)} of the {wanted} replicas the warm-up needs were ready before its timeout "
                "(engine pods still starting or failing: kubectl get pods; raise cache.warmup.timeoutSeconds "
                "for slow model downloads)"
            )
        time.sleep(2.0)


# --- The L2 namespace -----------------------------------------------------------------------------


def namespace_files(directory: str) -> tuple[set[str], dict[str, int]]:
    """(final chunk files below the namespace directory, temp files with their mtime in ns); pins are
    neither."""
    chunks: set[str] = set()
    temps: dict[str, int] = {}
    for root, dirs, files in os.walk(directory):
        relative_root = os.path.relpath(root, directory)
        if relative_root == ".":
            dirs[:] = [d for d in dirs if d != PIN_DIR]
        for name in files:
            relative = name if relative_root == "." else f"{relative_root}/{name}"
            if is_chunk_file(relative):
                chunks.add(relative)
            elif name.endswith(TEMP_SUFFIX):
                with contextlib.suppress(FileNotFoundError):  # renamed since the listing
                    temps[relative] = os.stat(os.path.join(root, name)).st_mtime_ns
    return chunks, temps


def in_flight(temps: dict[str, int], before: dict[str, int]) -> int:
    """Temp files written since `before` was listed: new ones, or old ones written to since. A temp that
    sat unchanged since then belongs to no store of this warm-up (an orphan a dead writer left, which the
    eviction's stale-temp step reclaims later): waiting for it would hold every warm-up to its timeout."""
    return sum(1 for name, mtime in temps.items() if before.get(name) != mtime)


def wait_written(
    directory: str,
    before: set[str],
    chunks: int,
    timeout_s: float,
    temps_before: dict[str, int] | None = None,
) -> set[str]:
    """The final chunk files new since `before`, once at least `chunks` are there and nothing is in flight
    (LMCache stores after the response, off the request path; in flight: temps new or changed since
    `temps_before`, listed with `before`); what there is at the timeout otherwise."""
    deadline = time.monotonic() + timeout_s
    while True:
        started = time.monotonic()
        present, temps = namespace_files(directory)
        new = present - before
        if (len(new) >= chunks and not in_flight(temps, temps_before or {})) or time.monotonic() >= deadline:
            return new
        # A large namespace on a FUSE mount takes a while to list: never list more than half the time.
        time.sleep(max(POLL_S, time.monotonic() - started))


def digest(tokens: list[int], salt: str | None) -> str:
    """What a pin was written for: the prefix's tokens and salt (a changed prefix is another pin)."""
    return hashlib.sha256(json.dumps([tokens, salt or ""]).encode()).hexdigest()[:32]


def pin_path(directory: str, name: str) -> str:
    return os.path.join(directory, PIN_DIR, f"{name}.json")


def read_pin(directory: str, name: str) -> dict[str, Any] | None:
    try:
        with open(pin_path(directory, name), encoding="utf-8") as handle:
            pin = json.load(handle)
    except (OSError, ValueError):
        return None
    return pin if isinstance(pin, dict) else None


def write_pin(directory: str, name: str, files: set[str], tokens: list[int], salt: str | None) -> None:
    """Write the pin atomically (a reader sees the old or the new one, never half of one)."""
    path = pin_path(directory, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pin = {"prefix": name, "files": sorted(files), "tokens": len(tokens), "digest": digest(tokens, salt)}
    temporary = f"{path}.{os.getpid()}.part"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(pin, handle)
    os.replace(temporary, path)


def drop_stale_pins(directory: str, listed: set[str]) -> list[str]:
    """Remove the pins of prefixes no longer listed (eviction ignores them already; this keeps it tidy)."""
    removed: list[str] = []
    try:
        names = os.listdir(os.path.join(directory, PIN_DIR))
    except FileNotFoundError:
        return removed
    for name in names:
        if name.endswith(".json") and name[: -len(".json")] not in listed:
            try:
                os.unlink(os.path.join(directory, PIN_DIR, name))
            except FileNotFoundError:
                continue
            removed.append(name[: -len(".json")])
    return sorted(removed)


# --- One prefix ------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What happened to one prefix; `problem` is empty when it was verified."""

    prefix: str
    tokens: int = 0
    chunks: int = 0  # whole chunks another replica can load (the last token is always computed)
    written: int | None = None  # new final chunk files; None: not measured (no namespace directory)
    already_cached: bool = False  # replica A itself hit it: written before the warm-up
    verified_tokens: int | None = None  # B's KV-connector hit tokens (+ L0 tokens from earlier prefixes)
    # "loaded": B loaded every whole chunk from the shared tier; "files": B had it in its own prefix cache
    # already (a re-run) and every chunk file this prefix's pin names is still in L2; "written": one
    # replica only, every chunk file written (or pinned and present), no load to prove it.
    proof: str = ""
    writer: str = ""
    verifier: str = ""
    pinned: int | None = None
    problem: str = ""

    @property
    def verified(self) -> bool:
        return not self.problem


@dataclass
class Settings:
    model: str
    chunk_tokens: int
    namespace_dir: str | None
    pin: bool
    write_timeout_s: float
    request_timeout_s: float
    log: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr, flush=True))
    deadline: float | None = None  # time.monotonic() after which no prefix is started (--timeout)


def warm_one(prefix: Prefix, writer: str, verifier: str | None, settings: Settings) -> Outcome:
    outcome = Outcome(prefix.name, writer=writer, verifier=verifier or "")
    try:
        tokens = token_ids(writer, settings.model, prefix, settings.request_timeout_s)
    except WarmError as error:
        outcome.problem = str(error)
        return outcome
    outcome.tokens = len(tokens)
    outcome.chunks = max(len(tokens) - 1, 0) // settings.chunk_tokens
    if outcome.chunks == 0:
        outcome.problem = (
            f"{len(tokens)} tokens: shorter than one {settings.chunk_tokens}-token chunk plus one token, so "
            "no replica can load any of it (lengthen the prefix, or drop it)"
        )
        return outcome
    whole = outcome.chunks * settings.chunk_tokens
    directory = settings.namespace_dir
    before, temps_before = namespace_files(directory) if directory else (set(), {})
    try:
        l0, connector = served(writer, settings.model, tokens, prefix.cache_salt, settings.request_timeout_s)
    except WarmError as error:
        outcome.problem = f"the warm-up request to {writer} failed: {error}"
        return outcome
    outcome.already_cached = l0 + connector >= whole
    new: set[str] = set()
    if directory:
        # Cached already (an upgrade that kept the namespace): nothing new to wait for.
        wait = 0.0 if outcome.already_cached else settings.write_timeout_s
        new = wait_written(directory, before, outcome.chunks, wait, temps_before)
        outcome.written = len(new)
    if verifier is None:
        # One replica (models[].replicas: 1): the write is all that can be shown; said in the summary.
        if len(new) >= outcome.chunks or (
            outcome.already_cached and _pinned_files_present(directory, prefix, tokens)
        ):
            outcome.proof = "written"
        else:
            outcome.problem = (
                f"{len(new)} of {outcome.chunks} chunk files written, and no other replica to prove a load "
                "(is L2 enabled on the engines, and this the directory they write?)"
            )
    else:
        try:
            l0, connector = served(
                verifier, settings.model, tokens, prefix.cache_salt, settings.request_timeout_s
            )
        except WarmError as error:
            outcome.problem = f"the verification request to {verifier} failed: {error}"
        else:
            # L0 tokens count only next to connector hits: a chunk shared with a prefix verified before
            # was loaded from L2 by that prefix's check.
            outcome.verified_tokens = connector + (l0 if connector > 0 else 0)
            if outcome.verified_tokens >= whole:
                outcome.proof = "loaded"
            elif connector == 0 and l0 >= whole and _pinned_files_present(directory, prefix, tokens):
                # A re-run on the same pods (an upgrade that left the engines alone): B answers from its own
                # prefix cache and cannot load it again; the chunk files the pin names are all still there.
                outcome.proof = "files"
            else:
                outcome.problem = _not_loaded(outcome, whole, connector, l0)
    if settings.pin and directory:
        outcome.pinned = _pin(directory, prefix, tokens, new)
    return outcome


def _pinned_files_present(directory: str | None, prefix: Prefix, tokens: list[int]) -> bool:
    pin = read_pin(directory, prefix.name) if directory else None
    if pin is None or pin.get("digest") != digest(tokens, prefix.cache_salt) or not pin.get("files"):
        return False
    return all(os.path.isfile(os.path.join(directory or "", name)) for name in pin["files"])


def _not_loaded(outcome: Outcome, whole: int, connector: int, l0: int) -> str:
    if connector == 0 and l0 >= whole:
        why = (
            "B answered from its own prefix cache (it served this prefix before), and the chunk files are "
            "not known from a pin or not all in L2 any more: restart B, or scale out, to prove it"
        )
    elif outcome.written == 0 and not outcome.already_cached:
        why = (
            "replica A wrote no chunk file to the namespace directory (is L2 enabled on the engines and this "
            "the directory they write, cache.l2.mountPath?)"
        )
    elif outcome.already_cached:
        why = "replica A found it cached already; it may sit in A's L1 only (its L2 chunks evicted)"
    else:
        why = "the chunks were written but B did not load them (B's KV connector log says why)"
    return f"{outcome.verifier} loaded {connector} of {whole} tokens from the shared tier (L0 {l0}): {why}"


def _pin(directory: str, prefix: Prefix, tokens: list[int], new: set[str]) -> int | None:
    """Pin the files this warm-up wrote, with those an earlier pin of the same prefix named and that are
    still there (LMCache writes only the chunks it does not hold, so a partly cached prefix adds a few)."""
    old = read_pin(directory, prefix.name)
    kept: set[str] = set()
    if old is not None and old.get("digest") == digest(tokens, prefix.cache_salt):
        listed = [name for name in old.get("files") or [] if isinstance(name, str)]
        kept = {name for name in listed if os.path.isfile(os.path.join(directory, name))}
    if new:
        write_pin(directory, prefix.name, new | kept, tokens, prefix.cache_salt)
        return len(new | kept)
    return len(kept) if old is not None and kept else None  # None: written before any warm-up listed it


# --- The run ---------------------------------------------------------------------------------------


def warm(prefixes: list[Prefix], replicas: list[str], settings: Settings) -> tuple[list[Outcome], list[str]]:
    """Warm every prefix through replicas[0] and verify it on replicas[1]; (outcomes, stale pins removed)."""
    writer, verifier = replicas[0], (replicas[1] if len(replicas) > 1 else None)
    outcomes = []
    for prefix in prefixes:
        if settings.deadline is not None and time.monotonic() >= settings.deadline:
            # Report what was not tried rather than be killed by the Job's deadline with no report.
            outcome = Outcome(prefix.name, problem="not attempted: the warm-up's timeout passed before it")
        else:
            outcome = warm_one(prefix, writer, verifier, settings)
        settings.log(line(outcome))
        outcomes.append(outcome)
    stale = []
    if settings.pin and settings.namespace_dir:
        stale = drop_stale_pins(settings.namespace_dir, {p.name for p in prefixes})
    return outcomes, stale


def line(outcome: Outcome) -> str:
    written = "-" if outcome.written is None else str(outcome.written)
    if outcome.already_cached:
        written += " (cached before)"
    pinned = "-" if outcome.pinned is None else str(outcome.pinned)
    verified = "-" if outcome.verified_tokens is None else str(outcome.verified_tokens)
    if outcome.proof == "files":
        state = "verified (the other replica had it cached; its pinned chunk files are all in L2)"
    elif outcome.proof == "written":
        state = "written, not proven (one replica: no other to load it)"
    else:
        state = "verified" if outcome.verified else f"NOT VERIFIED: {outcome.problem}"
    return (
        f"{outcome.prefix}: {outcome.tokens} tokens, {outcome.chunks} chunks, written {written}, "
        f"loaded by the other replica {verified} tokens, pinned {pinned}: {state}"
    )


def report(outcomes: list[Outcome], stale: list[str]) -> dict[str, Any]:
    failed = [o for o in outcomes if not o.verified]
    written_only = [o for o in outcomes if o.proof == "written"]
    verified = len(outcomes) - len(failed) - len(written_only)
    summary = f"{verified} of {len(outcomes)} prefixes warmed and verified from another replica"
    if written_only:
        summary += f"; {len(written_only)} written only (one replica: scale the model to 2 to prove the load)"
    if failed:
        summary += "; not verified: " + "; ".join(f"{o.prefix}: {o.problem}" for o in failed)
    return {
        "check": "l2-warm",
        "ok": not failed,
        "summary": summary,
        "prefixes": [{**asdict(o), "verified": o.verified} for o in outcomes],
        "stale_pins_removed": stale,
    }


def _terminate_with(summary: str, path: str) -> None:
    if os.path.exists(path):
        try:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(summary[:4000])  # the kubelet keeps at most 4096 bytes
        except OSError:
            pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="l2_warm", description="Warm a model's shared L2 with listed prefixes and verify the hits."
    )
    parser.add_argument("--prefixes", required=True, help="the prefixes file (JSON)")
    parser.add_argument("--model", required=True, help="the served model name")
    parser.add_argument("--service", help="headless Service whose DNS answer lists the ready replicas")
    parser.add_argument("--port", type=int, default=8000, help="the engines' port (with --service)")
    parser.add_argument("--replica", action="append", default=[], help="a replica's URL (repeat)")
    parser.add_argument(
        "--min-replicas", type=int, default=2, help="replicas to wait for (1: the write only, no proof)"
    )
    parser.add_argument("--namespace-dir", help="the model's L2 namespace directory (mounted claim)")
    parser.add_argument("--chunk-tokens", type=int, required=True, help="the KV connector's chunk size")
    parser.add_argument("--pin", action="store_true", help="record the written files for eviction to keep")
    parser.add_argument("--on-failure", choices=("fail", "warn"), default="fail")
    parser.add_argument(
        "--timeout", type=float, default=900.0, help="seconds to wait for replicas and start prefixes"
    )
    parser.add_argument("--write-timeout", type=float, default=120.0, help="seconds for a prefix's chunks")
    parser.add_argument("--request-timeout", type=float, default=300.0, help="seconds per request")
    parser.add_argument("--termination-log", default=TERMINATION_LOG, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return USAGE if exc.code else OK
    settings = Settings(
        args.model, args.chunk_tokens, args.namespace_dir, args.pin, args.write_timeout, args.request_timeout
    )
    try:
        if bool(args.service) == bool(args.replica):
            raise WarmError("give the replicas as --service HOST or as --replica URL (repeated), not both")
        if args.chunk_tokens < 1 or args.min_replicas < 1:
            raise WarmError("--chunk-tokens and --min-replicas must be at least 1")
        prefixes = load_prefixes(args.prefixes)
    except WarmError as error:
        return _stop(str(error), USAGE, args)
    settings.deadline = deadline = time.monotonic() + args.timeout
    find = (lambda: resolve(args.service, args.port)) if args.service else (lambda: list(args.replica))
    try:
        replicas = wait_for_replicas(find, args.min_replicas, deadline, settings.log)
    except WarmError as error:
        return _stop(str(error), FAILED, args)
    settings.log(
        f"warming {len(prefixes)} prefixes through {replicas[0]}, verifying on {replicas[1:2] or 'none'}"
    )
    outcomes, stale = warm(prefixes, replicas, settings)
    result = report(outcomes, stale)
    if not result["ok"] and args.on_failure == "warn":
        result["summary"] = "WARNING (cache.warmup.onFailure: warn): " + result["summary"]
    print(json.dumps(result, sort_keys=True))
    _terminate_with(result["summary"], args.termination_log)
    return OK if result["ok"] or args.on_failure == "warn" else FAILED


def _stop(summary: str, code: int, args: argparse.Namespace) -> int:
    """The warm-up could not run: report why; a timeout only warns with --on-failure warn."""
    if code == FAILED and args.on_failure == "warn":
        summary, code = "WARNING (cache.warmup.onFailure: warn): " + summary, OK
    print(json.dumps({"check": "l2-warm", "ok": False, "summary": summary, "prefixes": []}, sort_keys=True))
    _terminate_with(summary, args.termination_log)
    return code


if __name__ == "__main__":
    sys.exit(main())
