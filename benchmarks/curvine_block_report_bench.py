#!/usr/bin/env python3
"""How long a Curvine worker's full block report takes, against the chart's client `rpc_timeout_ms`.

A worker that starts registers, then sends every block it holds to the leader master in calls of
`[master] block_report_limit` blocks (1000 upstream; the chart leaves it), each one call of the worker's
`[client]`, so each bounded by `rpc_timeout_ms` (20 s in the chart): curvine-worker
src/worker/block/block_actor.rs:90-157, master_client.rs:99-133. Measured here with the real Curvine v0.4.1
binaries outside Kubernetes, in a network namespace of our own (loopback only), reusing
benchmarks/curvine_readpath_bench.py's render of the chart and its config rewrite: one master (127.0.0.1)
and one worker (127.0.0.11) with the chart's default config. `--blocks` small files are written through a
curvine-fuse mount by parallel writers (one file, one block), then the worker is restarted `--restarts`
times and each restart is timed: to "worker register success" and to "worker block report success" in its
log (which prints the report's total), and the master's own time per report call (its `operation_duration`
histogram, WorkerBlockReport). `--limit N` sets `block_report_limit` on the worker; `--one-call` adds a
last restart with the whole report in one call (what one call of that many blocks costs), and
`--one-call-client rpc_timeout_ms=N` gives the worker a shorter timeout there, to see a report call time out.

    sudo .venv/bin/python benchmarks/curvine_block_report_bench.py [--blocks 20000] [--writers 16]
        [--restarts 3] [--limit N] [--one-call] [--out DIR]

Exit 0 when every restart's full report finished with no report call retried or failed, 1 when one did
not (or the worker exited), 2 when Curvine cannot start (no root, no binaries, no helm).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import curvine_readpath_bench as rp  # the loopback cluster and the chart's render

from kvtier.cluster.realnode import curvine_binaries, pipe_limit
from kvtier.errors import UserError

NETNS_ENV = "KVTIER_BLOCKREPORT_NETNS"
MASTER, NODE = rp.MASTERS[0], rp.NODE_A
REPORT_LINE = re.compile(r"worker block report success, total blocks (\d+), used (\d+) ms")
METRIC = re.compile(r"^operation_duration_(sum|count|bucket)\{([^}]*)\} (\S+)$", re.M)


def single_node(conf: dict[str, Any]) -> dict[str, Any]:
    """The readpath bench's three-master config cut to its first master (a Raft group of one)."""
    conf["journal"]["journal_addrs"] = conf["journal"]["journal_addrs"][:1]
    conf["client"]["master_addrs"] = conf["client"]["master_addrs"][:1]
    return conf


class Pair(rp.Cluster):
    """One master and one worker; the worker can be stopped and started again on the same data."""

    def conf(self, chart: dict[str, Any], role: str, limit: int | None = None,
             client: dict[str, int] | None = None) -> Path:  # fmt: skip
        (self.work / role).mkdir(parents=True, exist_ok=True)
        conf = single_node(rp.local_config(chart, self.work, role))
        if limit:
            conf["master"]["block_report_limit"] = limit  # read by the worker (block_actor.rs:77)
        conf["client"].update(client or {})
        path = self.work / role / "curvine-cluster.toml"
        path.write_text(rp.toml_text(conf))
        return path

    def start_master(self, chart: dict[str, Any]) -> None:
        env = {"ORPC_BIND_HOSTNAME": MASTER, "CURVINE_MASTER_HOSTNAME": MASTER}
        self.spawn("m1", [str(self.bins["curvine-server"]), "--service", "master", "--conf",
                          str(self.conf(chart, "m1"))], env)  # fmt: skip
        self.client_conf = self.conf(chart, "client")

    def start_worker(self, conf: Path) -> subprocess.Popen[bytes]:
        env = {k: NODE for k in ("ORPC_BIND_HOSTNAME", "CURVINE_WORKER_HOSTNAME", "CURVINE_CLIENT_HOSTNAME")}
        self.spawn("wa", [str(self.bins["curvine-server"]), "--service", "worker", "--conf", str(conf)], env)
        return self.procs[-1]

    def stop_worker(self, proc: subprocess.Popen[bytes]) -> None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self.procs.remove(proc)

    def live(self) -> bool:
        return "live_worker_num: 1" in self.cli(NODE, "report", check=False)


def master_report_metric() -> dict[str, float]:
    """The master's WorkerBlockReport histogram so far, from its web port."""
    with urllib.request.urlopen(f"http://{MASTER}:9101/metrics", timeout=10) as reply:  # own namespace
        return report_histogram(reply.read().decode())


def report_histogram(text: str) -> dict[str, float]:
    """WorkerBlockReport's `operation_duration` (microseconds) in Prometheus text: sum, count, "le N"."""
    got: dict[str, float] = {}
    for kind, labels, value in METRIC.findall(text):
        if '"WorkerBlockReport"' in labels:
            le = re.search(r'le="([^"]+)"', labels)
            got[f"le {le.group(1)}" if le else kind] = float(value)
    return got


def slowest_bound_s(before: dict[str, float], after: dict[str, float]) -> float | None:
    """The smallest histogram bound (s) that every call since `before` stayed under; None past the top
    one (Curvine's buckets end at 100 ms: master_metrics.rs:82-84)."""
    calls = after.get("count", 0) - before.get("count", 0)
    bounds = sorted(float(k[3:]) for k in after if k.startswith("le ") and k != "le +Inf")
    for bound in bounds:
        key = next(k for k in after if k.startswith("le ") and k != "le +Inf" and float(k[3:]) == bound)
        if calls and after[key] - before.get(key, 0) >= calls:
            return bound / 1e6
    return None


def write_blocks(mount: Path, count: int, writers: int, size: int) -> float:
    """`count` files of `size` bytes, 1000 per folder, by `writers` threads; returns the seconds."""
    data = os.urandom(size)
    for d in range((count + 999) // 1000):
        (mount / f"d{d:04d}").mkdir(exist_ok=True)

    def one(i: int) -> None:
        (mount / f"d{i // 1000:04d}" / f"f{i:07d}").write_bytes(data)

    start = time.monotonic()
    with ThreadPoolExecutor(writers) as pool:
        for _ in pool.map(one, range(count), chunksize=64):
            pass
    return time.monotonic() - start


def wait_for(pattern: re.Pattern[str] | str, log: Path, since: int, limit_s: float,
             proc: subprocess.Popen[bytes]) -> re.Match[str] | None:  # fmt: skip
    """The pattern's first match in the log after `since`; None once `proc` has exited or time is up."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        gone = proc.poll() is not None
        found = re.search(pattern, log.read_bytes()[since:].decode(errors="replace"))
        if found or gone:
            return found
        time.sleep(0.05)
    return None


def restart(pair: Pair, proc: subprocess.Popen[bytes], conf: Path, limit_s: float) -> dict[str, Any]:
    """Stop the worker, start it again, time its registration, its full report and its return as live."""
    pair.stop_worker(proc)
    log = pair.work / "wa.log"
    since = log.stat().st_size
    before = master_report_metric()
    load = os.getloadavg()[0]
    start = time.monotonic()
    new = pair.start_worker(conf)
    reg = wait_for("worker register success", log, since, limit_s, new)
    registered = time.monotonic() - start if reg else None
    rep = wait_for(REPORT_LINE, log, since, limit_s, new)
    reported = time.monotonic() - start if rep else None
    live = None
    while rep and time.monotonic() - start < limit_s:
        if pair.live():
            live = time.monotonic() - start
            break
        time.sleep(0.2)
    after = master_report_metric()
    text = log.read_bytes()[since:].decode(errors="replace")
    calls = after.get("count", 0) - before.get("count", 0)
    return {
        "proc": new,
        "load_avg_1m": load,
        "registered_s": registered,
        "report_done_s": reported,
        "live_s": live,
        "report_blocks": int(rep.group(1)) if rep else None,
        "report_ms_worker": int(rep.group(2)) if rep else None,
        "master_calls": calls,
        "master_s_per_call": (after.get("sum", 0) - before.get("sum", 0)) / 1e6 / calls if calls else None,
        "master_slowest_call_under_s": slowest_bound_s(before, after),
        "worker_exit": new.poll(),
        "retries": len(re.findall(r"rpc\(\d+\) call failed|is unavailable", text)),
    }


def wait_live(pair: Pair, limit_s: float) -> bool:
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if pair.live():
            return True
        time.sleep(1)
    return False


def run(args: argparse.Namespace) -> int:
    try:
        bins = curvine_binaries.verified().paths
        chart = rp.render(rp.Setting("chart defaults"))
    except UserError as err:
        print(f"cannot start Curvine: {err}")
        return 2
    timeout_s = chart["client"]["rpc_timeout_ms"] / 1000
    one_call_client: dict[str, int] = {}
    for item in args.one_call_client:
        key, _, value = item.partition("=")
        if key not in chart["client"] or not value.isdigit():
            print(f"--one-call-client {item!r}: expected KEY=MS, KEY a [client] key, e.g. rpc_timeout_ms=500")
            return 2
        one_call_client[key] = int(value)
    print(f"chart's client rpc_timeout_ms: {timeout_s:.0f} s, block_size {chart['client']['block_size']}")
    work = Path(tempfile.mkdtemp(prefix="curvine-blockreport.", dir=args.workdir))
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    pair = Pair(bins, work)
    results: dict[str, Any] = {"blocks_written": 0, "restarts": []}
    mount = None
    try:
        pair.start_master(chart)
        proc = pair.start_worker(pair.conf(chart, "wa", args.limit))
        if not wait_live(pair, 80):
            print(f"the worker did not register in 80 s; logs in {work}")
            return 2
        pair.cli(NODE, "fs", "mkdir", "-p", rp.FS_DIR)
        mount = rp.Mount(pair, single_node(rp.local_config(chart, work, "client")), "a", NODE, 9301)
        load = os.getloadavg()[0]
        took = write_blocks(mount.path, args.blocks, args.writers, args.file_bytes)
        mount.close()
        mount = None
        results.update(blocks_written=args.blocks, write_s=took, write_load_avg_1m=load)
        print(f"wrote {args.blocks} files in {took:.0f} s ({args.blocks / took:.0f}/s, load {load:.1f})")
        runs: list[tuple[int | None, dict[str, int]]] = [(args.limit, {})] * args.restarts
        runs += [(args.blocks, one_call_client)] if args.one_call else []
        for i, (limit, client) in enumerate(runs):
            got = restart(pair, proc, pair.conf(chart, "wa", limit, client), args.limit_s)
            proc = got.pop("proc")
            results["restarts"].append({"block_report_limit": limit or 1000, "client": client, **got})
            print(f"restart {i + 1}: {json.dumps(results['restarts'][-1])}")
    except (UserError, OSError) as err:
        print(f"Curvine failed: {err}; logs in {work}")
        return 2
    finally:
        if mount:
            mount.close()
        pair.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    payload = {
        "measured": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["benchmarks/curvine_block_report_bench.py", *sys.argv[1:]]),
        "rpc_timeout_s": timeout_s, **results,
    }  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "curvine_block_report.json").write_text(json.dumps(payload, indent=1) + "\n")
    ok = all(r["report_blocks"] == args.blocks and not r["retries"] and r["worker_exit"] is None
             for r in results["restarts"])  # fmt: skip
    return 0 if ok and results["restarts"] else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=20000, help="small files to write (default 20000)")
    parser.add_argument("--writers", type=int, default=16, help="parallel writer threads (default 16)")
    parser.add_argument("--file-bytes", type=int, default=4096, help="bytes per file (default 4096)")
    parser.add_argument("--restarts", type=int, default=3, help="worker restarts to time (default 3)")
    parser.add_argument("--limit", type=int, default=None, help="block_report_limit (default: upstream's)")
    parser.add_argument(
        "--one-call", action="store_true", help="then one more restart with the whole report in one call"
    )
    parser.add_argument(
        "--one-call-client", action="append", default=[], metavar="KEY=MS",
        help="[client] key for the worker on that last restart, e.g. rpc_timeout_ms=500 (repeatable)",
    )  # fmt: skip
    parser.add_argument("--limit-s", type=float, default=600, help="give up on a restart after (s)")
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="folder for the JSON")
    parser.add_argument("--workdir", type=Path, default=Path("/var/tmp"), help="where the data goes")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, data)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root: a network namespace and a FUSE mount")
        return 2
    if not rp.HELM.exists():
        print(f"{rp.HELM} not built (make tools)")
        return 2
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not os.environ.get(NETNS_ENV):  # loopback only, gone when we exit; exec so signals reach us
        os.execvpe("unshare", ["unshare", "--net", sys.executable, *sys.argv], os.environ | {NETNS_ENV: "1"})
    with pipe_limit.raised():
        return run(args)


if __name__ == "__main__":
    sys.exit(main())
