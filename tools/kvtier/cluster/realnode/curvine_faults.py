"""Faults on a two-node charts/curvine release (curvine_release.install(spread=True)) under a client load,
and what the load saw: benchmarks/curvine_fault_bench.py drives them, docs/curvine-fuse.md ("Faults across
two nodes") records a run.

The load is one long-lived pod per node with the chart's claim at /l2, writing and reading as the L2
writers do (a temp name made O_EXCL, O_DIRECT writes, renamed over the final name; O_DIRECT reads). A chunk's
bytes follow from its name (SHAKE-256 of it), so any reader can check any chunk without being told a seed.
Each pod runs two threads: one writes its node's chunks (keeping the newest few), one reads back its own
newest chunk and the other node's newest one. Every operation prints one JSON line with its wall-clock
start (the pods share this machine's clock), so a fault's window is cut out of the logs afterwards.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kvtier import paths
from kvtier.cluster.realnode import curvine_release, netns
from kvtier.cluster.realnode import lifecycle as realnode
from kvtier.cluster.realnode.client import Kube
from kvtier.cluster.realnode.curvine_release import Installed
from kvtier.errors import UserError

CHUNK_MIB = 2  # small: two shared cores, and each op's latency is the time resolution of an outage
KEEP = 4  # own chunks kept; older ones are unlinked so the 2GB worker folders never fill
PAUSE_S = 0.3
SLOW_S = 5.0  # an op this slow counts as unavailable even when it ends well (a stalled engine)
KINDS = (("write", "own"), ("read", "own"), ("read", "other"))  # (op, of) of the load's lines

# NODE and MIB are replaced; the other node's chunks are found by listing (a metadata read too).
LOAD = """
import errno, hashlib, json, mmap, os, re, sys, threading, time
NODE, MIB, KEEP, PAUSE, GEN = 'NODE_', MIB_, KEEP_, PAUSE_, 'GEN_'
SIZE = MIB << 20
DIR = '/l2/ns'
lock = threading.Lock()

def expected(name):
    return hashlib.shake_256(name.encode()).digest(SIZE)

def say(**fields):
    with lock:
        print(json.dumps(fields), flush=True)

def timed(op, of, fn):
    # fn(out) names the chunk in out['name'] and returns the bytes read (None for a write).
    start = time.time()
    out = {'t': start, 'node': NODE, 'op': op, 'of': of, 'name': '', 'ok': True, 'wrong': False}
    try:
        got = fn(out)
        want = expected(out['name']) if got is not None else None
        if got is not None and got != want:
            # Fewer bytes than written, all of them right, is a short read; any differing byte is wrong.
            short = want.startswith(got)
            out.update(ok=False, short=short, wrong=not short, error=f'read {len(got)} of {SIZE} bytes')
    except OSError as e:
        code = errno.errorcode.get(e.errno, e.errno)
        out.update(ok=False, errno=e.errno, error=f'{code}: {e.strerror}')
    except Exception as e:
        out.update(ok=False, error=f'{type(e).__name__}: {e}')
    out['ms'] = round((time.time() - start) * 1000, 1)
    say(**out)
    return out['ok']

def write(name):
    os.makedirs(DIR, exist_ok=True)
    buf = mmap.mmap(-1, SIZE)
    buf.write(expected(name))
    temp = f'{DIR}/.{name}.{os.getpid()}.tmp'
    fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_DIRECT, 0o644)
    try:
        os.write(fd, buf)
    finally:
        os.close(fd)
    os.replace(temp, f'{DIR}/{name}')

def read(name):
    fd = os.open(f'{DIR}/{name}', os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, SIZE)
    try:
        n = os.readv(fd, [buf])
    finally:
        os.close(fd)
    return bytes(buf[:n])

def newest(node):
    pattern = re.compile(re.escape(f'{node}.{GEN}') + r'-(\\d+)\\.data')
    seqs = [int(m.group(1)) for m in map(pattern.fullmatch, os.listdir(DIR)) if m]
    if not seqs:
        raise FileNotFoundError(errno.ENOENT, f'no chunk of {node} listed')
    return f'{node}.{GEN}-{max(seqs)}.data'

def named(out, name):
    out['name'] = name
    return name

latest = [None]

def writer():
    seq = 0
    while True:
        seq += 1
        name = f'{NODE}.{GEN}-{seq}.data'
        if timed('write', 'own', lambda out: write(named(out, name))):
            latest[0] = name
            try:
                os.unlink(f'{DIR}/{NODE}.{GEN}-{seq - KEEP}.data')
            except OSError:
                pass
        time.sleep(PAUSE)

def reader(other):
    while True:
        mine = latest[0]
        if mine:
            timed('read', 'own', lambda out: read(named(out, mine)))
        # The other node's newest chunk, found by listing (a metadata read too).
        timed('read', 'other', lambda out: read(named(out, newest(other))))
        time.sleep(PAUSE)

say(started=time.time(), node=NODE)
threading.Thread(target=writer, daemon=True).start()
reader(sys.argv[1])
"""


def load_script(node: str, generation: int = 1) -> str:
    """The load for `node`; its chunks are named <node>.<generation>-<seq>.data, and it reads only the
    other node's chunks of the same generation (a restarted load must not read the old load's chunks,
    written under another configuration)."""
    return (
        textwrap.dedent(LOAD)
        .replace("GEN_", str(generation))
        .replace("NODE_", node)
        .replace("MIB_", str(CHUNK_MIB))
        .replace("KEEP_", str(KEEP))
        .replace("PAUSE_", str(PAUSE_S))
    )


def chart_claim(kube: Kube, installed: Installed) -> str:
    selector = f"app.kubernetes.io/instance={installed.release},app.kubernetes.io/component=storage"
    found = kube.kubectl("get", "pvc", "-n", installed.namespace, "-l", selector, "-o", "name").split()
    if len(found) != 1:
        raise UserError(f"expected the chart's own claim (pvc.enabled) in {installed.namespace}: {found}")
    return found[0].removeprefix("persistentvolumeclaim/")


def pod_name(node: str) -> str:
    return f"load-{node}"


def start_load(kube: Kube, installed: Installed, generation: int = 1) -> list[str]:
    """A load pod on each node (the other node's name as its argument), Running; their names."""
    claim = chart_claim(kube, installed)
    nodes = [n.name for n in kube.cluster.nodes]
    names = [_apply_load(kube, installed, claim, node, other, generation) for node, other in
             zip(nodes, reversed(nodes), strict=True)]  # fmt: skip
    for name in names:
        kube.wait_phase(installed.namespace, name, {"Running"}, timeout=240)
    return names


def _apply_load(kube: Kube, installed: Installed, claim: str, node: str, other: str, generation: int) -> str:
    name = pod_name(node)
    argv = ["-c", load_script(node, generation), other]
    pod = curvine_release.consumer_pod(kube.cluster, installed.namespace, name, claim, argv, node)
    kube.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    return name


def replace_load(kube: Kube, installed: Installed, index: int, generation: int = 1) -> str:
    """Node `index`'s load pod deleted and started again, Running (its earlier lines are lost with it:
    collect them first); its name."""
    nodes = [n.name for n in kube.cluster.nodes]
    node, other = nodes[index - 1], nodes[2 - index]
    kube.kubectl("delete", "pod", "-n", installed.namespace, pod_name(node), "--grace-period=1",
                 "--timeout=120s", check=False)  # fmt: skip
    name = _apply_load(kube, installed, chart_claim(kube, installed), node, other, generation)
    kube.wait_phase(installed.namespace, name, {"Running"}, timeout=240)
    return name


def stop_load(kube: Kube, installed: Installed, names: list[str]) -> None:
    """The load pods deleted and gone (the claim's node mounts with them)."""
    kube.kubectl("delete", "pods", "-n", installed.namespace, *names, "--grace-period=1", check=False)


def ops(kube: Kube, installed: Installed, names: list[str]) -> list[dict[str, Any]]:
    """Every op line the load pods printed so far, in start order."""
    lines: list[dict[str, Any]] = []
    for name in names:
        log = kube.run(
            [str(paths.TOOLS_BIN / "kubectl"), "logs", "-n", installed.namespace, name],
            timeout=120,
        )
        lines += [line for line in map(json.loads, log.splitlines()) if "op" in line]
    return sorted(lines, key=lambda line: line["t"])


@dataclass(frozen=True)
class Outage:
    """What one kind of op (write, or read of own / other's chunks) saw in a window."""

    ops: int  # started in the window
    failed: int  # of those, ended in an error (short and wrong reads included)
    wrong: int  # bytes that differ from what was written: the goal is 0
    short: int  # fewer bytes than written, those right (a reader that checks sizes sees a miss)
    unavailable_s: float  # the worse node's time inside the window spent in an erroring or slow op
    by_node: dict[str, float]  # each node's
    resumed: bool  # on every node, the last op in the window ended well
    slowest_ms: float
    errors: dict[str, int]


def _bad(line: dict[str, Any]) -> bool:
    """An op that counts as unavailability: an error other than a short read (those come without any
    fault: see docs/curvine-fuse.md), or one slower than SLOW_S."""
    return (not line["ok"] and not line.get("short")) or line["ms"] / 1000 > SLOW_S


def _unavailable(mine: list[dict[str, Any]], start: float, end: float) -> tuple[float, bool]:
    """One node's ops of one kind, in start order (each thread runs one at a time): the time inside
    [start, end) from each bad op's start to the next op's (or its own end), and whether the last op
    that started before `end` ended well."""
    total, resumed = 0.0, True
    for i, line in enumerate(mine):
        if line["t"] >= end:
            break
        resumed = not _bad(line)
        if resumed:
            continue
        until = mine[i + 1]["t"] if i + 1 < len(mine) else line["t"] + line["ms"] / 1000
        total += max(0.0, min(until, end) - max(line["t"], start))
    return total, resumed


def outage(lines: list[dict[str, Any]], op: str, of: str, start: float, end: float) -> Outage:
    """The ops of kind (op, of) summed over [start, end); see Outage."""
    kind = [x for x in lines if x["op"] == op and x["of"] == of]
    window = [x for x in kind if start <= x["t"] < end]
    errors: dict[str, int] = {}
    for x in window:
        if not x["ok"]:
            key = f"{x.get('node', '')}: {x.get('error', '?')}"[:120]
            errors[key] = errors.get(key, 0) + 1
    nodes = sorted({x["node"] for x in kind})
    per_node = [_unavailable([x for x in kind if x["node"] == n], start, end) for n in nodes]
    return Outage(
        ops=len(window),
        failed=sum(not x["ok"] for x in window),
        wrong=sum(bool(x["wrong"]) for x in window),
        short=sum(bool(x.get("short")) for x in window),
        unavailable_s=round(max((u for u, _ in per_node), default=0.0), 1),
        by_node={n: round(u, 1) for n, (u, _) in zip(nodes, per_node, strict=True)},
        resumed=all(r for _, r in per_node),
        slowest_ms=max((x["ms"] for x in window), default=0.0),
        errors=errors,
    )


def node_ns(cluster: realnode.RealCluster, index: int) -> str:
    return cluster.nodes[index - 1].netns


def _ip(*args: str) -> str:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise UserError(f"`ip {' '.join(args)}` failed: {proc.stderr.strip()}")
    return proc.stdout


def cut_link(cluster: realnode.RealCluster) -> list[str]:
    """Node 2's end of the veth pair down (node 1 keeps its address: its end only loses the carrier);
    node 2's routes before the cut, which an admin-down flushes and restore_link puts back."""
    ns = node_ns(cluster, 2)
    routes = [r for r in _ip("-n", ns, "route", "show").splitlines() if r.strip()]
    _ip("-n", ns, "link", "set", netns.PEER_LINK, "down")
    return routes


def restore_link(cluster: realnode.RealCluster, routes: list[str]) -> None:
    """Node 2's end up again and every route it had before the cut back."""
    ns = node_ns(cluster, 2)
    _ip("-n", ns, "link", "set", netns.PEER_LINK, "up")
    time.sleep(1)
    for route in routes:
        if "proto kernel" not in route:  # the address brings its own back
            _ip("-n", ns, "route", "replace", *route.split())


def stop_node(cluster: realnode.RealCluster) -> int:
    """Node 2 lost with its link up, as in a power-off (realnode.stop_node): its kubelet, containerd and
    every container (worker, node plugin with its FUSE clients, load pod, a master if any) SIGKILLed; its
    address stays, so a connect to it is refused at once where a cut link (cut_link) leaves it unanswered.
    How many processes were killed."""
    return realnode.stop_node(cluster.name, 2)


def start_node(cluster: realnode.RealCluster, progress: realnode.Progress) -> None:
    """Node 2 booted again (realnode.start_node): containerd, the kubelet and kube-proxy, until it is Ready;
    the kubelet then starts the node's pods again as it sees fit."""
    realnode.start_node(cluster.name, 2, progress=progress)


def node_pods(kube: Kube, node: str, since: float) -> dict[str, dict[str, Any]]:
    """Every pod bound to `node` ("namespace/name"): its phase, whether it is Ready with every container
    started after `since` (a Ready left over from before a stop does not count), and its restarts."""
    listed = json.loads(kube.kubectl("get", "pods", "-A", "--field-selector", f"spec.nodeName={node}",
                                     "-o", "json"))  # fmt: skip
    found = {}
    for pod in listed["items"]:
        status = pod.get("status", {})
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", []))
        containers = status.get("containerStatuses", [])
        started = [c.get("state", {}).get("running", {}).get("startedAt") for c in containers]
        fresh = bool(started) and all(s and _epoch(s) >= since for s in started)
        key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        found[key] = {
            "phase": status.get("phase", "?"), "back": ready and fresh,
            "restarts": sum(c.get("restartCount", 0) for c in containers),
            "state": [next(iter(c.get("state", {})), "?") for c in containers],
        }  # fmt: skip
    return found


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
