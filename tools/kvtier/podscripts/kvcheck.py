#!/usr/bin/env python3
"""Post-install checks of the tiered KV-cache bundle: the one implementation.

Run by the umbrella chart's `helm test` pods (from a ConfigMap, on the vLLM image's Python) and
imported by `kvtier smoke` / `kvtier bench`. Standard library only; Python >= 3.9.

    python3 kvcheck.py router --url U
    python3 kvcheck.py completion --url U --model M
    python3 kvcheck.py crosspod --a URL --b URL --model M [--metrics-a URL --metrics-b URL]
    python3 kvcheck.py l2-files --dir D
    python3 kvcheck.py curvine-workers --url MASTER_WEB_URL --expect N

Each prints one JSON line ({"check", "ok", "summary", ...details}) and exits 0 pass, 1 fail, 2 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

PASS, FAIL, USAGE = 0, 1, 2
DEFAULT_TIMEOUT = 30.0
API_KEY: str | None = None  # set by kvtier smoke/bench from the release; else $VLLM_API_KEY
# Counters that say how many prompt tokens came from a cache, by tier (first match wins per tier).
# L0: vLLM's own prefix cache; L1+L2: tokens the KV connector (LMCache or vLLM's offloading) supplied.
L0_HIT_METRICS = ("vllm:prefix_cache_hits",)
L0_QUERY_METRICS = ("vllm:prefix_cache_queries",)
EXTERNAL_HIT_METRICS = ("lmcache:num_hit_tokens", "vllm:external_prefix_cache_hits")
L2_READ_METRICS = ("lmcache:num_remote_read_requests", "lmcache:remote_read_requests")
REQUESTS_METRICS = ("vllm:request_success",)
# A replica's writes to the shared tier: a counter that advances when one lands, and a gauge of those
# under way. vLLM's offloading cascades CPU chunks to its secondary tiers after the answer
# (TieringOffloadingMetrics, vllm/v1/kv_offload/tiering/base.py, 0.32); LMCache counts remote puts when
# it exports them (the engine rig's LMCache does not: then the settle pause stands in).
L2_WRITE_METRICS = ("vllm:kv_offload_tiering_write_bytes", "lmcache:num_remote_write_requests")
L2_PENDING_METRICS = ("vllm:kv_offload_tiering_active_cascade_jobs", "lmcache:remote_put_task_num")
CHUNK_SUFFIXES = (".data", ".bin")  # a final L2 chunk: LMCache's fs connector, vLLM's fs offloading tier
WORDS = (  # noqa: SIM905 (a vocabulary reads best as prose)
    "cache tier replica prefix token router chunk memory storage node cluster latency request model "
    "layer block engine shared pool write read local remote hit miss warm cold policy queue batch "
    "value key state index tensor device host network volume file page table system"
).split()


class CheckError(Exception):
    """An endpoint or path misbehaved; the message names it, says what happened and what to check."""


# --- HTTP (urllib only) --------------------------------------------------------------------------


def _explain(method: str, url: str, error: BaseException, timeout: float) -> CheckError:
    if isinstance(error, urllib.error.HTTPError):
        body = error.read(300).decode("utf-8", "replace").strip()
        return CheckError(f"{method} {url}: HTTP {error.code} {error.reason}: {body or '(empty body)'}")
    reason = getattr(error, "reason", error)
    if isinstance(reason, (socket.timeout, TimeoutError)) or "timed out" in str(reason):
        return CheckError(f"{method} {url}: no answer within {timeout:g} s (server busy or wrong port?)")
    if isinstance(reason, ConnectionRefusedError):
        return CheckError(f"{method} {url}: connection refused (is the service running on that port?)")
    if isinstance(reason, socket.gaierror):
        return CheckError(f"{method} {url}: host name does not resolve ({reason})")
    return CheckError(f"{method} {url}: {reason}")


def _open(url: str, data: dict | None = None, timeout: float = DEFAULT_TIMEOUT) -> Any:
    if not url.startswith(("http://", "https://")):
        raise CheckError(f"{url!r} is not an http(s) URL (expected e.g. http://host:8000)")
    method = "POST" if data is not None else "GET"
    body = json.dumps(data).encode() if data is not None else None
    request = urllib.request.Request(url, data=body, method=method)
    # The key the engines require (auth.apiKeySecret): the test pods get it from the Secret; kvtier smoke
    # and bench set API_KEY from the release's Secret, or take it from the environment too.
    if api_key := API_KEY or os.environ.get("VLLM_API_KEY"):
        request.add_header("Authorization", f"Bearer {api_key}")
    if body is not None:
        request.add_header("Content-Type", "application/json")
    try:
        return urllib.request.urlopen(request, timeout=timeout)
    except (urllib.error.URLError, OSError) as error:
        raise _explain(method, url, error, timeout) from None


def _read(response: Any, method: str, url: str, timeout: float) -> bytes:
    try:
        return response.read()
    except OSError as error:  # a timeout while the body arrives
        raise _explain(method, url, error, timeout) from None


def http_text(url: str, timeout: float = DEFAULT_TIMEOUT) -> str:
    with _open(url, timeout=timeout) as response:
        return _read(response, "GET", url, timeout).decode("utf-8", "replace")


def http_json(url: str, data: dict | None = None, timeout: float = DEFAULT_TIMEOUT) -> Any:
    method = "POST" if data is not None else "GET"
    with _open(url, data, timeout) as response:
        raw = _read(response, method, url, timeout)
    try:
        return json.loads(raw)
    except ValueError:
        raise CheckError(f"{method} {url}: answer is not JSON: {raw[:120]!r}") from None


def stream_completion(
    url: str, model: str, prompt: str, max_tokens: int = 4, timeout: float = 120.0
) -> dict[str, Any]:
    """POST a streaming completion; time to the first token (TTFT) and to the end, seen by the client."""
    endpoint = url.rstrip("/") + "/v1/completions"
    payload = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": True, "temperature": 0}
    start = time.perf_counter()
    ttft: float | None = None
    text: list[str] = []
    with _open(endpoint, payload, timeout) as response:
        kind = response.headers.get("Content-Type", "")
        if "text/event-stream" not in kind:
            raise CheckError(
                f"POST {endpoint}: answered {kind or 'no Content-Type'} instead of a stream "
                "(text/event-stream); point the check at an OpenAI-compatible server that streams"
            )
        try:
            for raw in response:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                event = json.loads(data)
                if "error" in event:
                    raise CheckError(f"POST {endpoint}: server error in stream: {event['error']}")
                choices = event.get("choices") or []
                if choices and ttft is None:
                    ttft = time.perf_counter() - start
                text.extend(str(c.get("text") or "") for c in choices)
        except OSError as error:
            raise _explain("POST", endpoint, error, timeout) from None
        except ValueError:
            raise CheckError(f"POST {endpoint}: stream event is not JSON: {line[:120]!r}") from None
    if ttft is None:
        raise CheckError(f"POST {endpoint}: the stream ended without a token")
    return {"ttft_s": ttft, "total_s": time.perf_counter() - start, "text": "".join(text)}


# --- Prometheus metrics --------------------------------------------------------------------------


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> {metric name: sum over label sets}; `_total` suffixes are folded away."""
    sums: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "{" in line:
            name, _, rest = line.partition("{")
            rest = rest.rsplit("}", 1)[-1]
        else:
            name, _, rest = line.partition(" ")
        fields = rest.split()
        try:
            value = float(fields[0])
        except (IndexError, ValueError):
            continue
        if name.endswith("_created"):  # creation timestamps, not counts
            continue
        name = name[: -len("_total")] if name.endswith("_total") else name
        sums[name] = sums.get(name, 0.0) + value
    return sums


def read_metrics(url: str, timeout: float = DEFAULT_TIMEOUT) -> dict[str, float]:
    text = http_text(url, timeout)
    metrics = parse_metrics(text)
    if not metrics:
        raise CheckError(f"GET {url}: no Prometheus samples in the answer (is this a /metrics endpoint?)")
    return metrics


def first_metric(metrics: dict[str, float], names: tuple[str, ...]) -> tuple[str | None, float]:
    for name in names:
        if name in metrics:
            return name, metrics[name]
    return None, 0.0


def counter_increase(old: float, new: float) -> float:
    """How much a counter rose between two scrapes; one lower than before was reset (the engine
    restarted) and counts from zero, as PromQL's increase() reads it."""
    return new - old if new >= old else new


def tier_deltas(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """Cache hits between two scrapes of one engine, by tier (None where the engine has no such metric),
    each a counter_increase."""

    def delta(names: tuple[str, ...]) -> float | None:
        name, value = first_metric(after, names)
        return None if name is None else counter_increase(before.get(name, 0.0), value)

    return {
        "requests": delta(REQUESTS_METRICS),
        "l0_query_tokens": delta(L0_QUERY_METRICS),
        "l0_hit_tokens": delta(L0_HIT_METRICS),
        "external_hit_tokens": delta(EXTERNAL_HIT_METRICS),
        "l2_reads": delta(L2_READ_METRICS),
    }


def metrics_url(base: str) -> str:
    return base.rstrip("/") + "/metrics"


# --- Prompts -------------------------------------------------------------------------------------


def long_prompt(words: int, nonce: str | None = None) -> str:
    """A prompt of about `words` words that no cache holds yet (the nonce leads, so no prefix is shared)."""
    nonce = nonce or uuid.uuid4().hex[:12]
    rng = random.Random(nonce)
    body = " ".join(rng.choice(WORDS) for _ in range(max(words - 2, 1)))
    return f"Session {nonce}. {body}"


# --- Checks (each returns a result dict; raise CheckError for a broken endpoint) ---------------------


def result(check: str, ok: bool, summary: str, **details: Any) -> dict[str, Any]:
    return {"check": check, "ok": ok, "summary": summary, **details}


def check_router(url: str, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    base = url.rstrip("/")
    with _open(base + "/health", timeout=timeout) as response:
        status = response.status
    models = http_json(base + "/v1/models", timeout=timeout)
    ids = (
        [m.get("id") for m in models.get("data", []) if isinstance(m, dict)]
        if isinstance(models, dict)
        else []
    )
    if not ids:
        return result("router", False, f"{base}/v1/models lists no model", health=status, models=[])
    return result("router", True, f"healthy; serves {', '.join(map(str, ids))}", health=status, models=ids)


def check_completion(url: str, model: str, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    endpoint = url.rstrip("/") + "/v1/completions"
    payload = {"model": model, "prompt": "The shared cache tier", "max_tokens": 8, "temperature": 0}
    start = time.perf_counter()
    answer = http_json(endpoint, payload, timeout)
    elapsed = time.perf_counter() - start
    choices = answer.get("choices") if isinstance(answer, dict) else None
    tokens = (answer.get("usage") or {}).get("completion_tokens", 0) if isinstance(answer, dict) else 0
    if not choices or not isinstance(choices[0].get("text"), str) or not tokens:
        return result("completion", False, f"no completion in the answer: {str(answer)[:200]}")
    return result("completion", True, f"{tokens} tokens in {elapsed * 1000:.0f} ms", tokens=tokens)


def check_crosspod(
    a: str,
    b: str,
    model: str,
    metrics_a: str | None = None,
    metrics_b: str | None = None,
    words: int = 1500,
    settle_s: float = 1.0,
    timeout: float = 120.0,
    write_wait_s: float = 30.0,
) -> dict[str, Any]:
    """One long prompt to replica A (cold), then to replica B: B must load it from the shared tier. The
    verdict is B's hit tokens; the two TTFTs are reported, not judged: one sample each on engines that
    serve other traffic says little, and TTFT belongs to `kvtier bench`, which repeats and pairs them.
    B is asked once A's writes to the shared tier have landed (wait_for_l2_writes): they run after A's
    answer, and on a busy node they take seconds."""
    metrics_a, metrics_b = metrics_a or metrics_url(a), metrics_b or metrics_url(b)
    prompt = long_prompt(words)
    before_a = read_metrics(metrics_a, timeout)
    before_b = read_metrics(metrics_b, timeout)
    cold = stream_completion(a, model, prompt, timeout=timeout)
    a_writes = wait_for_l2_writes(metrics_a, before_a, write_wait_s, settle_s, timeout)
    warm = stream_completion(b, model, prompt, timeout=timeout)
    deltas = tier_deltas(before_b, read_metrics(metrics_b, timeout))
    details = {
        "ttft_a_s": cold["ttft_s"],
        "ttft_b_s": warm["ttft_s"],
        "b": deltas,
        "words": words,
        "a_l2_writes": a_writes,
    }
    hits = deltas["external_hit_tokens"]
    if hits is None:
        names = " or ".join(EXTERNAL_HIT_METRICS)
        return result(
            "crosspod",
            False,
            f"{metrics_b} has no {names}: is a KV connector (LMCache or vLLM's offloading) enabled on B, "
            "and PROMETHEUS_MULTIPROC_DIR set so its metrics reach vLLM's /metrics?",
            **details,
        )
    faster = warm["ttft_s"] < cold["ttft_s"]
    summary = (
        f"B loaded {hits:.0f} tokens from L1/L2; TTFT A {cold['ttft_s'] * 1000:.0f} ms -> "
        f"B {warm['ttft_s'] * 1000:.0f} ms"
    )
    if hits <= 0:
        summary = "B reported no KV connector hit tokens for A's prompt (shared L2 not reached); " + summary
        if a_writes["landed"] is False:
            summary += f"; A's writes to L2 had not landed {a_writes['waited_s']:.0f} s after its answer"
    elif not faster:
        summary += " (B not faster than A in this one sample: compare with `kvtier bench`)"
    return result("crosspod", hits > 0, summary, **details)


def wait_for_l2_writes(
    url: str,
    before: dict[str, float],
    limit_s: float,
    fallback_s: float = 0.0,
    timeout: float = DEFAULT_TIMEOUT,
) -> dict[str, Any]:
    """Poll a replica's metrics until a write to the shared tier has landed since `before` and none is
    under way, for at most `limit_s`. `landed` is None where the replica exports neither metric (an
    engine without a KV connector, or LMCache without its remote counters): there is nothing to wait
    on, so it pauses `fallback_s` to give the writes a moment."""
    start = time.monotonic()
    while True:
        now = read_metrics(url, timeout)
        name, written = first_metric(now, L2_WRITE_METRICS)
        waited = time.monotonic() - start
        if name is None:
            time.sleep(fallback_s)
            return {"landed": None, "waited_s": round(waited, 2)}
        pending = first_metric(now, L2_PENDING_METRICS)[1]
        if counter_increase(before.get(name, 0.0), written) > 0 and pending <= 0:
            return {"landed": True, "waited_s": round(waited, 2), "metric": name}
        if waited >= limit_s:
            return {"landed": False, "waited_s": round(waited, 2), "metric": name, "pending": pending}
        time.sleep(0.25)


def check_l2_files(directory: str, minimum: int = 1) -> dict[str, Any]:
    """Chunk files anywhere below the L2 root: LMCache's `*.data`, vLLM's `*.bin` (in flight: `*.tmp`)."""
    if not os.path.isdir(directory):
        return result("l2-files", False, f"{directory} is not a directory (is the L2 volume mounted?)")
    chunks = temps = size = 0
    for root, _dirs, files in os.walk(directory):
        for name in files:
            if name.endswith(CHUNK_SUFFIXES):
                chunks += 1
                size += os.path.getsize(os.path.join(root, name))
            elif name.endswith(".tmp"):
                temps += 1
    ok = chunks >= minimum
    summary = f"{chunks} chunk files ({size / 2**20:.1f} MiB), {temps} in flight, in {directory}"
    return result(
        "l2-files", ok, summary if ok else f"want >= {minimum}: {summary}", chunks=chunks, bytes=size
    )


def check_curvine_workers(url: str, expect: int, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    base = url.rstrip("/")
    try:
        overview = http_json(base + "/api/overview", timeout=timeout)
        live, lost = int(overview["live_workers"]), int(overview.get("lost_workers", 0))
    except (CheckError, KeyError, TypeError, ValueError):
        # Older masters: the plain-text /report ("live_workers: N").
        report = http_text(base + "/report", timeout)
        fields = dict(
            (k.strip(), v.strip()) for k, _, v in (ln.partition(":") for ln in report.splitlines()) if v
        )
        if "live_workers" not in fields:
            raise CheckError(f"{base}: neither /api/overview nor /report reports live_workers") from None
        live, lost = int(fields["live_workers"]), int(fields.get("lost_workers", "0") or 0)
    ok = live >= expect
    return result("curvine-workers", ok, f"{live} live (want >= {expect}), {lost} lost", live=live, lost=lost)


# --- CLI -----------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kvcheck", description="Post-install checks of the KV-cache bundle."
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--timeout", type=float, default=None, help="seconds per request")
    sub = parser.add_subparsers(dest="check", required=True)
    p = sub.add_parser("router", parents=[common], help="router health and model list")
    p.add_argument("--url", required=True)
    p = sub.add_parser("completion", parents=[common], help="a completion through URL")
    p.add_argument("--url", required=True)
    p.add_argument("--model", required=True)
    p = sub.add_parser("crosspod", parents=[common], help="a prompt to replica A, then B: B must hit L2")
    for flag in ("--a", "--b", "--model"):
        p.add_argument(flag, required=True)
    p.add_argument("--metrics-a")
    p.add_argument("--metrics-b")
    p.add_argument("--words", type=int, default=1500, help="prompt length in words")
    p = sub.add_parser("l2-files", parents=[common], help="the L2 directory holds chunk files")
    p.add_argument("--dir", required=True)
    p.add_argument("--min", type=int, default=1, help="fewest chunk files that pass")
    p = sub.add_parser("curvine-workers", parents=[common], help="Curvine master reports live workers")
    p.add_argument("--url", required=True)
    p.add_argument("--expect", type=int, required=True)
    return parser


def dispatch(args: argparse.Namespace) -> dict[str, Any]:
    t = args.timeout
    calls: dict[str, Callable[[], dict[str, Any]]] = {
        "router": lambda: check_router(args.url, t or DEFAULT_TIMEOUT),
        "completion": lambda: check_completion(args.url, args.model, t or DEFAULT_TIMEOUT),
        "crosspod": lambda: check_crosspod(
            args.a, args.b, args.model, args.metrics_a, args.metrics_b, args.words, timeout=t or 120.0
        ),
        "l2-files": lambda: check_l2_files(args.dir, args.min),
        "curvine-workers": lambda: check_curvine_workers(args.url, args.expect, t or DEFAULT_TIMEOUT),
    }
    return calls[args.check]()


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run one check; a broken endpoint is a failed check with its reason, never a traceback."""
    try:
        return dispatch(args)
    except CheckError as error:
        return result(args.check, False, str(error), error=True)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # exits 2 on usage errors
    outcome = run(args)
    print(json.dumps(outcome, sort_keys=True))
    return PASS if outcome["ok"] else FAIL


if __name__ == "__main__":
    sys.exit(main())
