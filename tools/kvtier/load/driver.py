"""Drive vLLM's own load generator, `vllm bench serve`, with the mix of kvtier.load.workload.

One `vllm bench serve` client per router replica: a Kubernetes Service spreads connections over the router
pods, so each request is given to one router replica at random (seeded) and each client replays its share
of the trace on the trace's own clock (`timed_trace`, open loop). The clients run side by side from the
engine venv (make engine) and save per-request results (`--save-detailed`); kvtier.load.summary merges
them. Every engine's Prometheus counters are read before and after a point, so hits are attributed to
tiers by the engines themselves, not guessed by the client.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvtier import waiting
from kvtier.engine_rig import rendered
from kvtier.engine_rig.errors import RigError
from kvtier.load import workload
from kvtier.podscripts import kvcheck

PERCENTILES = (50, 95, 99)
CLIENT_TIMEOUT_S = 1800.0
# vLLM builds each hash id's tokens from `hash(f"{id}:{size}")`: Python's string hash, so the clients (and
# every run) must share PYTHONHASHSEED or "the same" prefix differs between them.
# PYTHONUNBUFFERED: a client's lines reach its log as printed (SENDING is waited for there).
CLIENT_ENV = {"PYTHONHASHSEED": "0", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "PYTHONUNBUFFERED": "1"}
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}  # a local tokenizer: never ask the Hub
# A request unanswered after this long fails (vllm bench serve would wait six hours: engine_rig/vllm_cli.py).
REQUEST_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Target:
    router_urls: Sequence[str]  # one client each (the chart's router replicas)
    model: str  # the served model name
    tokenizer: str  # a local folder or a Hugging Face id: vLLM turns hash ids into tokens with it
    engine_urls: Sequence[str] = ()  # read for per-tier hit counters (may be empty: no attribution)
    headers: dict[str, str] = field(default_factory=dict)  # e.g. Authorization for an API key
    offline: bool = False  # the tokenizer is a local folder (the rig): the clients never ask the Hub


@dataclass(frozen=True)
class Point:
    qps: float
    records: list[dict[str, Any]]  # one per request: the trace line + what its client measured
    duration_s: float
    tiers: dict[str, float]  # counter deltas summed over the engines
    engine_requests: list[float]  # requests each engine finished (how the routing spread the load)


def client_argv(
    python: Path, url: str, target: Target, trace: Path, count: int, multiplier: float, mix: workload.Mix,
    result: Path, max_concurrency: int | None = None,
) -> list[str]:  # fmt: skip
    argv = [
        str(python), str(rendered.VLLM_CLI), "bench", "serve",
        "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions",
        "--model", target.model, "--tokenizer", target.tokenizer,
        "--dataset-name", "timed_trace", "--dataset-path", str(trace), "--num-prompts", str(count),
        "--timed-trace-chunk-hash-size", str(mix.block_tokens),
        "--timed-trace-sec-multiplier", f"{multiplier:.6f}",
        "--percentile-metrics", "ttft,itl,e2el", "--metric-percentiles", ",".join(map(str, PERCENTILES)),
        # Readiness is checked before the point; vLLM's check would send the first prompt early and warm it.
        "--ready-check-timeout-sec", "0", "--num-warmups", "0", "--disable-tqdm", "--seed", str(mix.seed),
        # Greedy: vllm bench serve leaves the temperature to the server unless told; a run is then
        # reproducible, and the soak can hold every answer to its reference.
        "--temperature", "0",
        "--save-result", "--save-detailed",
        "--result-dir", str(result.parent), "--result-filename", result.name,
    ]  # fmt: skip
    for name, value in target.headers.items():
        argv += ["--header", f"{name}={value}"]
    if max_concurrency is not None:
        argv += ["--max-concurrency", str(max_concurrency)]
    return argv


SENDING = "Starting main benchmark run"  # vllm bench serve's line right before its first request
SENDING_PATIENCE_S = 300.0


def _wait_sending(logs: list[Path], processes: list[subprocess.Popen[bytes]]) -> None:
    """Until a client's log says it starts sending, or a client has exited (a failed one's error is read
    after, and the others are stopped then)."""
    deadline = time.monotonic() + SENDING_PATIENCE_S
    while time.monotonic() < deadline and all(p.poll() is None for p in processes):
        if any(SENDING in log.read_text(errors="replace") for log in logs if log.exists()):
            return
        time.sleep(0.1)


def split(requests: list[workload.Request], parts: int, seed: int) -> list[list[workload.Request]]:
    """Each request to one of `parts` router replicas at random, as a Service spreads connections."""
    rng = random.Random(seed)
    shares: list[list[workload.Request]] = [[] for _ in range(parts)]
    for request in requests:
        shares[rng.randrange(parts)].append(request)
    return shares


SCRAPE_PATIENCE_S = 15.0  # an engine just restarted (the soak) may drop a connection or two first


def scrape(urls: Sequence[str]) -> list[dict[str, float]]:
    def one(url: str) -> dict[str, float]:
        return waiting.wait_until(  # read_metrics raises on a page without samples: an answer is truthy
            lambda: kvcheck.read_metrics(kvcheck.metrics_url(url)),
            deadline=waiting.deadline_in(SCRAPE_PATIENCE_S),
            fail=lambda last: RigError(
                f"{url}/metrics did not answer within {SCRAPE_PATIENCE_S:.0f} s{last}"
            ),
            tolerate=(kvcheck.CheckError,),
        )

    return [one(url) for url in urls]


def tier_totals(deltas: list[dict[str, Any]]) -> dict[str, float]:
    """Per-engine counter deltas (kvcheck.tier_deltas) summed over the engines that have each counter."""
    totals: dict[str, float] = {}
    for engine in deltas:
        for name, value in engine.items():
            if value is not None:
                totals[name] = totals.get(name, 0.0) + value
    return totals


def run_point(
    python: Path, target: Target, requests: list[workload.Request], mix: workload.Mix, qps: float,
    work_dir: Path, split_seed: int = 0, max_concurrency: int | None = None,
    settle: Callable[[], None] = lambda: None, request_timeout_s: float = REQUEST_TIMEOUT_S,
    sending: Callable[[], None] = lambda: None, armed: Callable[[], None] = lambda: None,
) -> Point:  # fmt: skip
    """Replay `requests` at `qps` (the trace time-scaled) through every router replica at once; at most
    `max_concurrency` in flight per client when given (the soak's one-at-a-time reference pass).
    `sending()` runs once the first client starts sending (seconds after it starts: vLLM imports first;
    the soak's faults count from there). `armed()` runs before any client starts: the soak holds the load
    there until its volume fault is confirmed in force. `settle()` runs after the clients and before the
    engines' counters are read again (the soak ends its fault there: a killed engine is back to be read)."""
    multiplier = workload.arrival_rate(requests) / qps
    point_dir = work_dir / f"qps-{qps:g}"
    point_dir.mkdir(parents=True, exist_ok=True)
    shares = split(requests, len(target.router_urls), split_seed)
    origin = requests[0].timestamp  # every client's clock starts at the first request of the whole trace
    clients = []
    before = scrape(target.engine_urls)
    armed()
    for index, (url, share) in enumerate(zip(target.router_urls, shares, strict=True)):
        if not share:
            continue
        trace = workload.write_trace(share, point_dir / f"trace-{index}.jsonl", offset=origin)
        result = point_dir / f"result-{index}.json"
        argv = client_argv(python, url, target, trace, len(share), multiplier, mix, result, max_concurrency)
        log = (point_dir / f"client-{index}.log").open("w")
        env = {**os.environ, **CLIENT_ENV, **(OFFLINE_ENV if target.offline else {})}
        env["KVTIER_REQUEST_TIMEOUT_S"] = str(request_timeout_s)
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        clients.append((index, url, share, result, process, log))
    records: list[dict[str, Any]] = []
    duration = 0.0
    try:
        _wait_sending([point_dir / f"client-{c[0]}.log" for c in clients], [c[4] for c in clients])
        sending()
        for index, url, share, result, process, log in clients:
            try:
                code = process.wait(CLIENT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise RigError(f"vllm bench serve against {url} ran past {CLIENT_TIMEOUT_S:.0f} s") from None
            log.close()
            if code != 0 or not result.exists():
                tail = (point_dir / f"client-{index}.log").read_text()[-2000:]
                raise RigError(f"vllm bench serve against {url} exited {code}:\n{tail}")
            data = json.loads(result.read_text())
            duration = max(duration, float(data["duration"]))
            records += _records(share, data, index)
    finally:  # one client failed or timed out: the others stop too, no orphan keeps loading the engines
        for *_, process, log in clients:
            if process.poll() is None:
                process.kill()
                process.wait()
            log.close()
    settle()
    after = scrape(target.engine_urls)
    deltas = [kvcheck.tier_deltas(old, new) for old, new in zip(before, after, strict=True)]
    records.sort(key=lambda r: r["timestamp"])
    return Point(qps, records, duration, tier_totals(deltas), [d["requests"] or 0.0 for d in deltas])


def _records(share: list[workload.Request], data: dict[str, Any], router: int) -> list[dict[str, Any]]:
    """vLLM's per-request lists (in request order) joined to the trace lines they replayed."""
    errors = data.get("errors") or [""] * len(share)
    columns = ("ttfts", "itls", "latencies", "output_lens")
    if any(len(data.get(c) or []) != len(share) for c in columns):
        found = len(data.get("ttfts") or [])
        raise RigError(f"vllm bench serve returned {found} results for {len(share)} requests")
    return [
        {
            **request.trace_line(),
            "router": router,
            "ok": not error,
            "error": error or "",
            "ttft_s": data["ttfts"][i],
            "itl_s": list(data["itls"][i] or []),
            "latency_s": data["latencies"][i],
            "output_tokens": data["output_lens"][i],
            "text": (data.get("generated_texts") or [None] * len(share))[i],
            # when the client sent it: its time.perf_counter(), CLOCK_MONOTONIC on Linux, the same clock
            # as time.monotonic() in this process (the soak places faults on it)
            "sent_s": (data.get("start_times") or [None] * len(share))[i],
        }
        for i, (request, error) in enumerate(zip(share, errors, strict=True))
    ]
