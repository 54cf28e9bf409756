#!/usr/bin/env python3
"""Where one LMCache L2 hit's time goes through Curvine's FUSE, against a local folder: syscalls of the hit.

Outside Kubernetes: the real Curvine v0.4.1 binaries on loopback as benchmarks/curvine_readpath_bench.py
starts them (three masters, two workers, in a network namespace of our own; its Cluster and Mount), with the
chart's read settings (`config.read` 1MB x 8). Two vLLM CPU engines of the rig (kvtier.engine_rig.tiers,
LMCache, integrity on) each mount their L2 volume at a symlink of their own, as each pod gets its own FUSE
mount:

- stand-in: both links point at one folder on disk;
- curvine: A's at a curvine-fuse mount, B's at a second mount (both claim worker A's node: same node);
- curvine-meta (--meta-cache): B's at a third mount with `config.fuse` entry/attr timeouts 60000 ms and
  enableMetaCache true.

Per trial and backend (the order alternates trial by trial): the links are pointed at the backend, A stores a
fresh prompt, and once its chunk files are final (listed through A's mount, so B's caches stay cold) B asks
for the same prompt under `strace -f -T` of B's whole process tree. Syscalls on B's L2 paths (and on the
descriptors opened there) are summed per kind; the masters' audit lines (one per RPC) are counted,
curvine-fuse's /metrics of B's mount is scraped before and after, and B's LMCache log lines of the hit are
kept. The first trial is a warm-up, left out.

    .venv/bin/python benchmarks/curvine_hit_trace.py [--trials 5] [--words 1800] [--meta-cache] [--out DIR]

As root. Exit 0 when every traced hit loaded tokens from L2 on every backend, 1 when one did not, 2 when
Curvine, strace or the engines cannot start.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import curvine_readpath_bench as readpath  # beside this file: its loopback Curvine
from rich.console import Console
from rich.table import Table

from kvtier.cluster.realnode import curvine_binaries, pipe_limit
from kvtier.engine_rig import tiers
from kvtier.engine_rig.errors import RigError
from kvtier.errors import UserError
from kvtier.podscripts import kvcheck

NETNS_ENV = "KVTIER_HITTRACE_NETNS"
SYSCALLS = (
    "%file,read,pread64,readv,preadv,openat,close,fstat,newfstatat,statx,getdents64,fadvise64,lseek,ioctl"
)
KIND_OF = {
    **dict.fromkeys(("openat", "open", "creat", "openat2"), "open"),
    **dict.fromkeys(("read", "pread64", "readv", "preadv", "preadv2"), "read"),
    "close": "close",
    **dict.fromkeys(
        (
            "stat",
            "lstat",
            "fstat",
            "newfstatat",
            "statx",
            "access",
            "faccessat",
            "faccessat2",
            "readlink",
            "readlinkat",
            "getdents64",
            "statfs",
        ),
        "lookup/stat",
    ),
}
KINDS = ("lookup/stat", "open", "read", "close", "other")
FD_CALLS = {
    "read",
    "pread64",
    "readv",
    "preadv",
    "preadv2",
    "close",
    "fstat",
    "fadvise64",
    "lseek",
    "getdents64",
}
CALL = re.compile(r"^(\w+)\((.*)\)\s+=\s+(-?\d+|\?)(.*?)<([\d.]+)>\s*$")
WEB_PORTS = {"w": 9301, "r": 9302, "m": 9303}
RETRIEVE = re.compile(r"retriev", re.IGNORECASE)
AUDIT = re.compile(r"audit\.rs.*cmd=(\w+) ok=(\w+).*usedUs=(\d+)")  # the master's log line per RPC


def log_sizes(work: Path) -> dict[Path, int]:
    return {log: log.stat().st_size for log in work.glob("[mw]*.log")}


def master_rpcs(sizes: dict[Path, int]) -> dict[str, dict[str, float]]:
    """The masters' audit lines written since `sizes`: RPCs by command, count and master-side ms."""
    out: dict[str, dict[str, float]] = {}
    for log, size in sizes.items():
        with log.open(errors="replace") as handle:
            handle.seek(size)
            for line in handle:
                match = AUDIT.search(line)
                if match and match.group(1) != "GetMasterInfo":  # followers' leader polls
                    rpc = out.setdefault(match.group(1), {"count": 0, "ms": 0.0})
                    rpc["count"] += 1
                    rpc["ms"] += int(match.group(3)) / 1000
    return out


# ---------------------------------------------------------------------------------------------- strace --
def tree(pid: int) -> list[int]:
    """`pid` and its descendants, from /proc (vLLM's engine core is a child of the API server)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        out.append(todo.pop())
        todo += children.get(out[-1], [])
    return out


def tgid(tid: int, known: dict[int, int]) -> int:
    """The process a thread belongs to: descriptors are per process, strace prints thread ids."""
    if tid not in known:
        try:
            status = Path(f"/proc/{tid}/status").read_text()
            known[tid] = int(re.search(r"^Tgid:\s+(\d+)", status, re.M).group(1))  # type: ignore[union-attr]
        except (OSError, AttributeError):
            known[tid] = tid
    return known[tid]


def calls(text: str) -> list[tuple[int, str, str, str, float]]:
    """(tid, name, args, result, seconds) of every finished call, split calls joined again."""
    pending: dict[int, str] = {}
    out = []
    for line in text.splitlines():
        head = line.split(None, 2)
        if len(head) < 3 or not head[0].isdigit():
            continue
        tid, rest = int(head[0]), head[2]
        if rest.endswith("<unfinished ...>"):
            pending[tid] = rest[: -len("<unfinished ...>")]
            continue
        if rest.startswith("<... "):
            rest = pending.pop(tid, "") + rest.split("resumed>", 1)[-1]
        match = CALL.match(rest)
        if match:
            name, args, result, _, seconds = match.groups()
            out.append((tid, name, args, result, float(seconds)))
    return out


def l2_sums(text: str, prefixes: list[str], known: dict[int, int]) -> dict[str, Any]:
    """Per kind, count and ms of the calls on paths under `prefixes` or on descriptors opened there."""
    sums = {kind: {"count": 0, "ms": 0.0} for kind in KINDS}
    names: dict[str, dict[str, float]] = {}
    fds: dict[tuple[int, int], str] = {}
    files: set[str] = set()
    for tid, name, args, result, seconds in calls(text):
        proc = tgid(tid, known)
        first = args.split(",", 1)[0].strip()
        path = re.search(r'"([^"]*)"', args)
        on_l2 = bool(path and any(path.group(1).startswith(p) for p in prefixes))
        if first.isdigit() and (proc, int(first)) in fds and (name in FD_CALLS or not on_l2):
            on_l2 = True  # a call on an L2 descriptor, or relative to an L2 directory's
        if not on_l2:
            continue
        kind = KIND_OF.get(name, "other")
        sums[kind]["count"] += 1
        sums[kind]["ms"] += seconds * 1000
        each = names.setdefault(name, {"count": 0, "ms": 0.0})
        each["count"] += 1
        each["ms"] += seconds * 1000
        if name in ("openat", "open") and result.lstrip("-").isdigit() and int(result) >= 0:
            fds[(proc, int(result))] = path.group(1) if path else "?"
            if path and path.group(1).endswith(".data"):
                files.add(path.group(1))
        if name == "close" and first.isdigit():
            fds.pop((proc, int(first)), None)
    return {"kinds": sums, "syscalls": names, "chunk_files_opened": len(files)}


def traced(pid: int, log: Path, ask: Any) -> tuple[Any, str]:
    """`ask()` run while strace follows `pid`'s process tree; (its answer, strace's text)."""
    pids = tree(pid)
    argv = ["strace", "-f", "-tt", "-T", "-e", f"trace={SYSCALLS}", "-o", str(log)]
    proc = subprocess.Popen([*argv, *(a for p in pids for a in ("-p", str(p)))], stderr=subprocess.PIPE)
    time.sleep(2.0)  # every thread attached
    if proc.poll() is not None:
        raise UserError(f"strace exited: {proc.stderr.read().decode()[-300:] if proc.stderr else ''}")
    try:
        answer = ask()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    return answer, log.read_text(errors="replace")


# --------------------------------------------------------------------------------------------- helpers --
def point(link: Path, target: Path) -> None:
    """Re-point a pod's L2 symlink in one rename (an engine never sees it missing)."""
    tmp = link.with_name(link.name + ".new")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    tmp.replace(link)


def scrape(port: int) -> dict[str, float]:
    """curvine-fuse's /metrics, one entry per labelled series (by FUSE opcode), histogram buckets left out."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:  # loopback
            text = reply.read().decode()
    except OSError:
        return {}
    series = {}
    for line in text.splitlines():
        parts = line.rsplit(None, 1)
        if len(parts) == 2 and not line.startswith("#") and "_bucket" not in parts[0]:
            try:
                series[parts[0]] = float(parts[1])
            except ValueError:
                continue
    return series


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: round(v - before.get(k, 0.0), 3) for k, v in after.items() if v != before.get(k, 0.0)}


def mirror_dirs(source: Path, target: Path) -> None:
    """The folders the engines made at start (the model's namespace) in another backend's L2."""
    for folder in [source, *(p for p in source.rglob("*") if p.is_dir())]:
        (target / folder.relative_to(source)).mkdir(parents=True, exist_ok=True)


# ------------------------------------------------------------------------------------------------- run --
def trial(rig: tiers.TieredRig, backend: str, setup: dict[str, Any], words: int, out: Path) -> dict[str, Any]:
    for link, target in zip(setup["links"], setup["targets"][backend], strict=True):
        point(link, target)
    url_a, b = rig.started[0].url, rig.started[1]
    prompt = kvcheck.long_prompt(words)
    tokens = tiers.prompt_tokens(url_a, prompt)
    # Listed through A's mount: a listing through B's would fill B's caches before its hit.
    assert rig.l2_dir is not None
    mine = setup["links"][0] / rig.l2_dir.relative_to(setup["links"][1])
    present = len(list(mine.glob("*.data")))
    tiers.ask(rig, 0, prompt, "A stores")
    want = present + tokens // rig.chunk_size
    deadline = time.monotonic() + 60
    while len(list(mine.glob("*.data"))) < want:
        if time.monotonic() > deadline:
            raise RigError(f"A's chunk files did not appear in {mine} within 60 s")
        time.sleep(0.2)
    time.sleep(1.0)  # A's last rename settled
    port = setup["ports"].get(backend)
    before = scrape(port) if port else {}
    log_at, curvine_logs = b.log.stat().st_size, log_sizes(setup["work"])
    load = os.getloadavg()[0]
    step, text = traced(
        b.popen.pid,
        out / f"strace-{backend}-{time.time_ns()}.txt",
        lambda: tiers.ask(rig, 1, prompt, "B hit"),
    )
    after = scrape(port) if port else {}
    rpcs = master_rpcs(curvine_logs)
    with b.log.open(errors="replace") as handle:
        handle.seek(log_at)
        lmcache = [line.rstrip() for line in handle if RETRIEVE.search(line)]
    prefixes = [str(setup["links"][1]), *(str(t) for t in setup["targets"][backend])]
    return {
        "backend": backend, "prompt_tokens": tokens, "hit_tokens": step.hit_tokens, "ttft_ms": step.ttft_ms,
        "load_1m": load, **l2_sums(text, prefixes, setup["tgids"]),
        "fuse_metrics_delta": delta(before, after), "lmcache_log": lmcache[-6:],
        "master_rpcs": rpcs,
    }  # fmt: skip


def summary(trials: list[dict[str, Any]], backends: list[str], console: Console) -> dict[str, Any]:
    table = Table(title="B's L2 hit, per trial medians: syscalls on L2 paths (strace -f -T)")
    for column in ("backend", "TTFT ms", "hit tokens", *(f"{k} n / ms" for k in KINDS), "files"):
        table.add_column(column, justify="left" if column == "backend" else "right")
    out: dict[str, Any] = {}
    for backend in backends:
        mine = [t for t in trials if t["backend"] == backend]
        if not mine:
            continue
        med = {
            kind: {
                "count": statistics.median(t["kinds"][kind]["count"] for t in mine),
                "ms": statistics.median(t["kinds"][kind]["ms"] for t in mine),
            }
            for kind in KINDS
        }
        out[backend] = {
            "ttft_ms": statistics.median(t["ttft_ms"] for t in mine),
            "hit_tokens": statistics.median(t["hit_tokens"] for t in mine),
            "files": statistics.median(t["chunk_files_opened"] for t in mine),
            "kinds": med,
        }
        table.add_row(
            backend, f"{out[backend]['ttft_ms']:.0f}", f"{out[backend]['hit_tokens']:.0f}",
            *(f"{med[k]['count']:.0f} / {med[k]['ms']:.1f}" for k in KINDS), f"{out[backend]['files']:.0f}",
        )  # fmt: skip
    console.print(table)
    return out


def run(args: argparse.Namespace, console: Console) -> int:
    try:
        bins = curvine_binaries.verified().paths
    except UserError as err:
        console.print(f"[red]cannot start Curvine: {err}")
        return 2
    if not shutil.which("strace"):
        console.print("[red]strace not found (apt-get install strace)")
        return 2
    work = Path(tempfile.mkdtemp(prefix="curvine-hittrace.", dir=args.workdir))
    args.out.mkdir(parents=True, exist_ok=True)
    console.print(f"work folder: {work}")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    cluster = readpath.Cluster(bins, work)
    mounts: dict[str, readpath.Mount] = {}
    plain = readpath.read_setting("1MB", 8)  # the chart's read defaults
    meta = readpath.read_setting(
        "1MB", 8, entryTimeoutMs="60000", attrTimeoutMs="60000", enableMetaCache="true"
    )
    backends = ["standin", "curvine", *(["curvine-meta"] if args.meta_cache else [])]
    trials: list[dict[str, Any]] = []
    try:
        try:
            cluster.start(readpath.render(plain))
            cluster.cli(readpath.NODE_A, "fs", "mkdir", "-p", readpath.FS_DIR)
            for name, setting in (("w", plain), ("r", plain), *((("m", meta),) if args.meta_cache else ())):
                conf = readpath.local_config(readpath.render(setting), work, "client")
                mounts[name] = readpath.Mount(cluster, conf, name, readpath.NODE_A, WEB_PORTS[name])
        except (UserError, OSError) as err:
            console.print(f"[red]Curvine did not start: {err}")
            return 2
        standin = work / "standin-l2"
        standin.mkdir()
        (mounts["w"].path / "l2").mkdir(exist_ok=True)
        links = [work / "pod-a-l2", work / "pod-b-l2"]
        setup: dict[str, Any] = {
            "links": links,
            "targets": {
                "standin": [standin, standin],
                "curvine": [mounts["w"].path / "l2", mounts["r"].path / "l2"],
                **(
                    {"curvine-meta": [mounts["w"].path / "l2", mounts["m"].path / "l2"]}
                    if args.meta_cache
                    else {}
                ),
            },
            "ports": {"curvine": WEB_PORTS["r"], "curvine-meta": WEB_PORTS["m"]},
            "tgids": {},
            "work": work,
        }
        for link in links:
            point(link, standin)
        try:
            with tiers.TieredRig(work / "rig", l2_dirs=tuple(links)) as rig:
                mirror_dirs(standin, mounts["w"].path / "l2")
                for n in range(args.trials + 1):
                    order = backends if n % 2 == 0 else list(reversed(backends))
                    for backend in order:
                        got = trial(rig, backend, setup, args.words, args.out)
                        console.print(
                            f"trial {n} {backend}: TTFT {got['ttft_ms']:.0f} ms, hit {got['hit_tokens']}, "
                            f"load {got['load_1m']:.1f}, " + ", ".join(
                                f"{k} {v['count']}/{v['ms']:.1f}ms" for k, v in got["kinds"].items())
                        )  # fmt: skip
                        if n > 0:  # trial 0: each engine's first L2 use, a warm-up
                            trials.append(got)
        except RigError as err:
            console.print(f"[red]the engines did not run: {err}")
            return 2
    finally:
        for mount in mounts.values():
            mount.close()
        cluster.stop()
    result = summary(trials, backends, console)
    (args.out / "hit_trace.json").write_text(json.dumps({"summary": result, "trials": trials}, indent=1))
    console.print(f"results in {args.out / 'hit_trace.json'}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if trials and all(t["hit_tokens"] > 0 for t in trials) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5, help="traced hits per backend after a warm-up")
    parser.add_argument("--words", type=int, default=1800, help="words per prompt (about a token each)")
    parser.add_argument(
        "--meta-cache", action="store_true", help="also B through a mount with FUSE meta caching"
    )
    parser.add_argument("--out", type=Path, default=Path("bench-results/hit-trace"), help="results folder")
    parser.add_argument("--workdir", type=Path, default=Path("/var/tmp"), help="where the data folders go")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs, data)")
    args = parser.parse_args()
    console = Console(width=160)
    if os.geteuid() != 0:
        console.print("[red]needs root: a network namespace, FUSE mounts, ptrace")
        return 2
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not os.environ.get(NETNS_ENV):  # loopback only, as the read-path benchmark
        os.execvpe("unshare", ["unshare", "--net", sys.executable, *sys.argv], os.environ | {NETNS_ENV: "1"})
    with pipe_limit.raised():
        return run(args, console)


if __name__ == "__main__":
    sys.exit(main())
