#!/usr/bin/env python3
"""Where a cross-node 14 MiB chunk read through Curvine's FUSE goes under the kubelet (issue 63, item 5).

tests/node/test_two_node_curvine.py reads a chunk written on node 1 from a pod on node 2 in 100-172 ms
(0.12 GiB/s), while benchmarks/curvine_readpath_bench.py, the same binaries outside Kubernetes, reads
across nodes at 0.40-0.52 GiB/s. This benchmark starts a two-node cluster of its own, installs charts/curvine
as that test does (curvine_release.install(spread=True)) and looks at the suspects one at a time:

- what the node plugin runs: the read settings in the mounted config and curvine-fuse's command line, the
  cpu.shares and memory limit of the node plugin's and the worker's pods (the kubelet's cgroupfs tree);
- the link between the nodes: a raw TCP transfer of one chunk from node 2's network namespace to node 1's
  address (the veth pair, kvtier.cluster.realnode.netns) against the same inside node 1 (loopback), and MTUs;
- per round, a writer pod on node 1 puts two fresh chunks (O_DIRECT, as the L2 writers), then a fresh pod on
  node 2 reads them as the test's reader does, each timed for open and read apart: chunk 1 twice (the first
  read of a fresh FUSE client, then again), chunk 2 twice (a new file on a client already warm). The writer
  reads chunk 2 back too (same node: short-circuit). With no other pod of the class on node 2, each reader
  gets a client of its own (one curvine-fuse per StorageClass and node; docs/curvine-fuse.md), which the
  run checks from the node plugin's process list;
- three conditions, interleaved round by round: `chart` (the pods as installed: the node plugin and
  worker at `requests.cpu: 20m`, the reader BestEffort, as the test's), `raised` (the node plugin's and the
  worker's pod cgroups at cpu.shares 1024, as a request of one CPU; each node's BestEffort folder too,
  which the kubelet puts back to 2 when it next syncs, so the run records the shares after each round) and
  `veth-gro` (GRO on node 2's end of the link between the nodes). Every chunk's bytes are checked;
- at the end, a long-lived reader on node 2 reads the last chunks in six passes, GRO off and on by turns,
  each with the packets node 1's link sent and, per chunk, the CPU time of node 2's curvine-fuse and node
  1's worker and their time runnable but waiting for a CPU (/proc/<pid>/task/*/schedstat).

    sudo .venv/bin/python benchmarks/curvine_kubelet_read_bench.py [--rounds 4] [--out DIR] [--keep]

Prints each case's median ms and GiB/s per condition, the load average at each round, and writes
kubelet-read.json. Exit 0 when it measured, 2 when the cluster or Curvine cannot start.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import fcntl
import json
import os
import secrets
import socket
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvtier.bench.schedstat import sched_ms
from kvtier.cluster.realnode import curvine_binaries, curvine_observe, curvine_release, netns
from kvtier.cluster.realnode import lifecycle as realnode
from kvtier.cluster.realnode.client import Kube
from kvtier.errors import UserError

CHUNK_MIB = 14
CPU_ROOT = Path("/sys/fs/cgroup/cpu")
MEMORY_ROOT = Path("/sys/fs/cgroup/memory")
RAISED_SHARES = 1024  # what the kubelet gives a pod requesting one CPU (cpu.shares = milli-CPU * 1024 / 1000)
CONDITIONS = ("chart", "raised", "veth-gro")
SIOCETHTOOL, ETHTOOL_GGRO, ETHTOOL_SGRO = 0x8946, 0x2B, 0x2C  # linux/sockios.h, linux/ethtool.h
NET_PORT = 47011

# Inside the pods (the cluster's python image). Writes: temp name, O_DIRECT, rename, as l2_blocks.py.
WRITE = """
import hashlib, json, mmap, os, sys
out = []
for path in sys.argv[1:]:
    buf = mmap.mmap(-1, MIB << 20)
    buf.write(os.urandom(MIB << 20))
    temp = f'{path}.{os.getpid()}.tmp'
    fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_DIRECT, 0o644)
    os.write(fd, buf)
    os.close(fd)
    os.replace(temp, path)
    out.append(hashlib.sha256(buf).hexdigest())
print(json.dumps(out))
"""
# Reads: each path whole with O_DIRECT into one buffer touched beforehand; open and read timed apart.
READ = """
import hashlib, json, mmap, os, sys, time
buf = mmap.mmap(-1, MIB << 20)
buf.write(bytes(MIB << 20))
out = []
for path in sys.argv[1:]:
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    t1 = time.perf_counter()
    n = os.readv(fd, [buf])
    t2 = time.perf_counter()
    os.close(fd)
    out.append({'open_s': t1 - t0, 'read_s': t2 - t1, 'n': n, 'sha256': hashlib.sha256(buf[:n]).hexdigest()})
print(json.dumps(out))
"""
SLEEP = "import time\ntime.sleep(86400)\n"
SERVER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(8); print('ready', flush=True)
for _ in range(int(sys.argv[3])):
    c, _ = s.accept(); left = int(sys.argv[4])
    while left > 0:
        left -= len(c.recv(1 << 20))
    c.sendall(b'k'); c.close()
"""
CLIENT = """
import json, socket, sys, time
data = bytes(int(sys.argv[4])); times = []
for _ in range(int(sys.argv[3])):
    t0 = time.perf_counter(); c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
    c.sendall(data); c.recv(1); times.append(time.perf_counter() - t0); c.close()
print(json.dumps(times))
"""


def code(script: str) -> str:
    return script.replace("MIB", str(CHUNK_MIB))


def gib_s(seconds: float) -> float:
    return (CHUNK_MIB << 20) / seconds / 2**30


def pod_uid(kube: Kube, ns: str, pod: str) -> str:
    return kube.kubectl("get", "pod", "-n", ns, pod, "-o", "jsonpath={.metadata.uid}")


def pod_cgroup(root: Path, uid: str) -> Path:
    """The kubelet's cgroupfs folder of pod `uid` (pod<uid>) under `root`."""
    for folder, dirs, _ in os.walk(root):
        if f"pod{uid}" in dirs:
            return Path(folder) / f"pod{uid}"
    raise UserError(f"no cgroup folder pod{uid} under {root}: is the pod running on this machine?")


def pod_on(kube: Kube, inst: curvine_release.Installed, component: str, node: str) -> str:
    (pod,) = [p for p, n in curvine_observe.pods(kube, inst, component).items() if n == node]
    return pod


def make_pod(kube: Kube, inst: curvine_release.Installed, claim: str, node: str, argv: list[str]) -> str:
    name = f"r-{secrets.token_hex(3)}"
    pod = curvine_release.consumer_pod(kube.cluster, inst.namespace, name, claim, argv, node)
    kube.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    return name


def fuse_processes(kube: Kube, inst: curvine_release.Installed, node: str) -> list[str]:
    """The node plugin's curvine-fuse processes on `node`: 'pid start-ticks' each."""
    script = (
        "for p in /proc/[0-9]*; do if tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q '^[^ ]*curvine-fuse'; "
        "then echo \"${p#/proc/} $(cut -d' ' -f22 $p/stat)\"; fi; done"
    )
    pod = pod_on(kube, inst, "csi-node", node)
    out = kube.kubectl("exec", "-n", inst.namespace, pod, "-c", "csi-plugin", "--", "sh", "-c", script)
    return out.split("\n") if out.strip() else []


def plugin_facts(kube: Kube, inst: curvine_release.Installed, node: str) -> dict[str, Any]:
    """The read settings the node plugin's mounts load and curvine-fuse's command line."""
    pod = pod_on(kube, inst, "csi-node", node)
    script = (
        "grep -E '^(read_|max_readahead|direct_io|kernel_cache)' /opt/curvine/conf/curvine-cluster.toml;"
        " for p in /proc/[0-9]*; do c=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null);"
        ' case "$c" in *curvine-fuse*) echo "cmdline: $c";; esac; done'
    )
    out = kube.kubectl("exec", "-n", inst.namespace, pod, "-c", "csi-plugin", "--", "sh", "-c", script)
    return {"node_plugin_conf_and_fuse": out.splitlines()}


def cgroup_facts(kube: Kube, inst: curvine_release.Installed) -> dict[str, Any]:
    """cpu.shares and memory limit/usage/failcnt of every Curvine pod, and the QoS folders' shares."""
    facts: dict[str, Any] = {}
    for component in ("csi-node", "worker", "master"):
        for pod in curvine_observe.pods(kube, inst, component):
            uid = pod_uid(kube, inst.namespace, pod)
            cpu, mem = pod_cgroup(CPU_ROOT, uid), pod_cgroup(MEMORY_ROOT, uid)
            facts[pod] = {
                "cpu.shares": int((cpu / "cpu.shares").read_text()),
                "memory.limit_mib": int((mem / "memory.limit_in_bytes").read_text()) >> 20,
                "memory.usage_mib": int((mem / "memory.usage_in_bytes").read_text()) >> 20,
                "memory.failcnt": int((mem / "memory.failcnt").read_text()),
            }
            facts[f"{pod} qos"] = {
                "folder": cpu.parent.name,
                "cpu.shares": int((cpu.parent / "cpu.shares").read_text()),
            }
    return facts


def ethtool_gro(ifname: str, value: int | None = None) -> int:
    """GRO of interface `ifname` in this thread's network namespace, set to `value` first when given (the
    ETHTOOL_SGRO / ETHTOOL_GGRO ioctls: this machine has no ethtool)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for cmd, arg in ([(ETHTOOL_SGRO, value)] if value is not None else []) + [(ETHTOOL_GGRO, 0)]:
            buf = array.array("B", struct.pack("II", cmd, arg))
            fcntl.ioctl(
                sock.fileno(), SIOCETHTOOL, struct.pack("16sP", ifname.encode(), buf.buffer_info()[0])
            )
    return int(struct.unpack("II", buf.tobytes())[1])


def node2_gro(cluster: realnode.RealCluster, value: int | None = None) -> int:
    """GRO on node 2's end of the link between the nodes (netns.PEER_LINK), where node 1's worker's
    packets arrive: on, the veth coalesces them before node 2 forwards them to the reading pod."""
    with netns.entered(cluster.nodes[1].netns):
        return ethtool_gro(netns.PEER_LINK, value)


def tx_packets(cluster: realnode.RealCluster) -> tuple[int, int]:
    """Packets and bytes node 1's end of the link between the nodes has sent (`ip -s link`: this process's
    /sys shows its own namespace's devices, not node 1's)."""
    argv = ["ip", "-n", cluster.nodes[0].netns, "-s", "-j", "link", "show", netns.NODE_LINK]
    (link,) = json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
    return int(link["stats64"]["tx"]["packets"]), int(link["stats64"]["tx"]["bytes"])


def set_shares(folders: list[Path], shares: list[int]) -> None:
    for folder, value in zip(folders, shares, strict=True):
        (folder / "cpu.shares").write_text(f"{value}\n")


def inside(namespace: str) -> list[str]:
    return ["ip", "netns", "exec", namespace, sys.executable]


def link_facts(cluster: realnode.RealCluster) -> dict[str, Any]:
    """MTUs, and a raw TCP send of one chunk from node 2 to node 1's address (veth) and within node 1."""
    first, second = cluster.nodes
    facts: dict[str, Any] = {}
    for node in (first, second):
        out = subprocess.run(["ip", "-n", node.netns, "-o", "link"], capture_output=True, text=True).stdout
        facts[f"{node.name} links"] = [" ".join(line.split()[1:5]) for line in out.splitlines()]
    size, count = str(CHUNK_MIB << 20), 6
    for label, client_ns in (("veth node 2 -> node 1", second.netns), ("loopback in node 1", first.netns)):
        server = subprocess.Popen(
            [*inside(first.netns), "-c", SERVER, first.ip, str(NET_PORT), str(count), size],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        out = subprocess.run(
            [*inside(client_ns), "-c", CLIENT, first.ip, str(NET_PORT), str(count), size],
            capture_output=True, text=True, timeout=120, check=True,
        ).stdout  # fmt: skip
        server.wait(timeout=30)
        times = json.loads(out)
        facts[label] = {
            "ms": [round(t * 1000, 2) for t in times],
            "median_gib_s": round(gib_s(statistics.median(times)), 2),
        }
    return facts


def host_pid(kube: Kube, inst: curvine_release.Installed, component: str, node: str, needle: str) -> int:
    """The machine's PID of the process of `component`'s pod on `node` whose command line has `needle`."""
    folder = pod_cgroup(CPU_ROOT, pod_uid(kube, inst.namespace, pod_on(kube, inst, component, node)))
    for procs in folder.glob("*/cgroup.procs"):
        for pid in procs.read_text().split():
            with contextlib.suppress(OSError):
                if needle in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                    return int(pid)
    raise UserError(f"no {needle!r} process in {component} on {node}")


def cpu_passes(
    kube: Kube, inst: curvine_release.Installed, claim: str, paths: list[str], passes: int, gro: int
) -> list[dict[str, Any]]:
    """A long-lived reader on node 2 reads `paths` `passes` times, node 2's link GRO as set up (`gro`) and
    on by turns; per pass the reads, the packets node 1's link sent and, per chunk, the CPU time and
    runnable wait of node 2's curvine-fuse and node 1's worker."""
    first, second = (n.name for n in kube.cluster.nodes)
    reader = make_pod(kube, inst, claim, second, ["-c", SLEEP])
    kube.wait_phase(inst.namespace, reader, {"Running"}, timeout=240)
    pids = {
        "fuse (node 2)": host_pid(kube, inst, "csi-node", second, "curvine-fuse"),
        "worker (node 1)": host_pid(kube, inst, "worker", first, "--service"),
    }
    out = []
    for number in range(passes):
        node2_gro(kube.cluster, 1 if number % 2 else gro)
        sent = tx_packets(kube.cluster)
        before = {n: sched_ms(pid) for n, pid in pids.items()}
        reads = json.loads(
            kube.kubectl("exec", "-n", inst.namespace, reader, "--", "python3", "-c", code(READ), *paths)
        )
        after = {n: sched_ms(pid) for n, pid in pids.items()}
        packets, sent_bytes = (a - b for a, b in zip(tx_packets(kube.cluster), sent, strict=True))
        out.append({
            "gro": 1 if number % 2 else gro,
            "load1": os.getloadavg()[0],
            "packets_per_chunk": packets / len(paths),
            "bytes_per_packet": sent_bytes / max(packets, 1),
            "read_ms": [r["read_s"] * 1000 for r in reads],
            "per_chunk": {n: {k: (after[n][k] - before[n][k]) / len(paths) for k in before[n]} for n in pids},
        })  # fmt: skip
    node2_gro(kube.cluster, gro)
    kube.kubectl("delete", "pod", "-n", inst.namespace, reader, "--wait=false")
    return out


def chart_claim(kube: Kube, inst: curvine_release.Installed) -> str:
    selector = f"app.kubernetes.io/instance={inst.release},app.kubernetes.io/component=storage"
    (found,) = kube.kubectl("get", "pvc", "-n", inst.namespace, "-l", selector, "-o", "name").split()
    return found.removeprefix("persistentvolumeclaim/")


def one_round(
    kube: Kube, inst: curvine_release.Installed, claim: str, writer: str, condition: str, number: int
) -> dict[str, Any]:
    _first, second = (n.name for n in kube.cluster.nodes)
    ns = inst.namespace
    paths = [f"/l2/{condition}-{number}-{i}.chunk" for i in (1, 2)]
    digests = json.loads(kube.kubectl("exec", "-n", ns, writer, "--", "python3", "-c", code(WRITE), *paths))
    same = json.loads(kube.kubectl("exec", "-n", ns, writer, "--", "python3", "-c", code(READ), paths[1]))
    before = fuse_processes(kube, inst, second)
    argv = ["-c", code(READ), paths[0], paths[0], paths[1], paths[1]]
    reader = make_pod(kube, inst, claim, second, argv)
    phase = kube.wait_phase(ns, reader, {"Succeeded", "Failed"}, timeout=240)
    log = kube.kubectl("logs", "-n", ns, reader, check=False)
    kube.kubectl("delete", "pod", "-n", ns, reader, "--wait=true", "--timeout=90s", check=False)
    if phase != "Succeeded":
        raise UserError(f"reader pod {reader} on {second}: {phase}: {log[-2000:]}")
    reads = json.loads(log.strip().splitlines()[-1])
    expected = [digests[0], digests[0], digests[1], digests[1]]
    if [r["sha256"] for r in reads] != expected or same[0]["sha256"] != digests[1]:
        raise UserError(f"round {number} ({condition}): a chunk read back with other bytes than written")
    cases = [
        "fresh client, new file",
        "same client, same file again",
        "warm client, new file",
        "warm client, same file again",
    ]
    return {
        "condition": condition,
        "round": number,
        "load1": os.getloadavg()[0],
        "fuse_on_node_2_before": before,
        "cross": dict(
            zip(cases, ({"open_s": r["open_s"], "read_s": r["read_s"]} for r in reads), strict=True)
        ),
        "same node (writer's client, new file)": {"open_s": same[0]["open_s"], "read_s": same[0]["read_s"]},
    }


def measure(
    kube: Kube, inst: curvine_release.Installed, rounds: int, progress: Callable[[str], None]
) -> dict[str, Any]:
    first, _second = (n.name for n in kube.cluster.nodes)
    ns = inst.namespace
    claim = chart_claim(kube, inst)
    writer = make_pod(kube, inst, claim, first, ["-c", SLEEP])
    kube.wait_phase(ns, writer, {"Running"}, timeout=240)
    result: dict[str, Any] = {"facts": {"link": link_facts(kube.cluster)}}
    # Warm-up round (left out): node 2's first client, the images' first start there.
    one_round(kube, inst, claim, writer, "warmup", 0)
    result["facts"]["plugin node 1"] = plugin_facts(kube, inst, first)
    result["facts"]["cgroups"] = cgroup_facts(kube, inst)
    pods = [p for c in ("csi-node", "worker") for p in curvine_observe.pods(kube, inst, c)]
    folders = [pod_cgroup(CPU_ROOT, pod_uid(kube, ns, p)) for p in pods]
    # The reader pods are BestEffort, as the test's: their QoS folder (one per node) is raised too.
    folders += sorted({f.parent.parent / "besteffort" for f in folders})
    chart_shares = [int((f / "cpu.shares").read_text()) for f in folders]
    gro = node2_gro(kube.cluster)
    result["facts"]["node 2 link GRO as set up"] = gro
    samples: list[dict[str, Any]] = []
    try:
        for number in range(1, rounds + 1):
            order = CONDITIONS if number % 2 else tuple(reversed(CONDITIONS))
            for condition in order:
                set_shares(folders, [RAISED_SHARES] * len(folders) if condition == "raised" else chart_shares)
                node2_gro(kube.cluster, 1 if condition == "veth-gro" else gro)
                progress(f"round {number}/{rounds}: {condition} (load {os.getloadavg()[0]:.1f})")
                sample = one_round(kube, inst, claim, writer, condition, number)
                sample["shares_after"] = [int((f / "cpu.shares").read_text()) for f in folders]
                samples.append(sample)
        written = [f"/l2/{s['condition']}-{s['round']}-{i}.chunk" for s in samples[-2:] for i in (1, 2)]
        result["cpu_passes"] = cpu_passes(kube, inst, claim, written, passes=6, gro=gro)
    finally:
        set_shares(folders, chart_shares)
        node2_gro(kube.cluster, gro)
    result["samples"] = samples
    result["facts"]["shares"] = {
        str(f.relative_to(CPU_ROOT)): v for f, v in zip(folders, chart_shares, strict=True)
    }
    return result


def summary(samples: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    table: dict[str, dict[str, dict[str, float]]] = {}
    for condition in CONDITIONS:
        mine = [s for s in samples if s["condition"] == condition]
        cases = {f"cross: {k}": [s["cross"][k] for s in mine] for k in mine[0]["cross"]}
        cases["same node, new file"] = [s["same node (writer's client, new file)"] for s in mine]
        for case, values in cases.items():
            read = statistics.median(v["read_s"] for v in values)
            table.setdefault(case, {})[condition] = {
                "open_ms": statistics.median(v["open_s"] for v in values) * 1000,
                "read_ms": read * 1000,
                "gib_s": gib_s(read),
                "n": len(values),
            }
    return table


def run(args: argparse.Namespace) -> dict[str, Any]:
    def progress(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)

    name = f"kubread-{os.getpid()}"
    cluster = realnode.up(name, progress=progress, nodes=2)
    try:
        kube = Kube(cluster)
        with curvine_release.raised_pipe_max_size():
            inst = curvine_release.install(kube, "curvine", progress, spread=True)
            result = measure(kube, inst, args.rounds, progress)
            if args.keep:
                progress(f"--keep: cluster {name} left up; Enter takes it down")
                input()
    finally:
        realnode.down(name, progress=progress)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="rounds per condition (after one warm-up)")
    parser.add_argument(
        "--out", type=Path, default=Path("bench-results"), help="folder for kubelet-read.json"
    )
    parser.add_argument(
        "--keep", action="store_true", help="leave the cluster up until Enter, to look inside"
    )
    args = parser.parse_args()
    reasons = realnode.preconditions() + [r for r in [curvine_binaries.missing()] if r]
    if reasons:
        print(f"curvine kubelet read bench: cannot run here: {'; '.join(reasons)}")
        return 2
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    try:
        result = run(args)
    except (UserError, AssertionError, subprocess.SubprocessError, OSError) as error:
        print(f"curvine kubelet read bench: {error}")
        return 2
    result["started"] = started
    result["summary"] = summary(result["samples"])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "kubelet-read.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["facts"], indent=1))
    for p in result["cpu_passes"]:
        cpu = ", ".join(
            f"{n}: {v['run_ms']:.1f} ms on a CPU, {v['wait_ms']:.1f} ms waiting"
            for n, v in p["per_chunk"].items()
        )
        print(
            f"GRO {p['gro']}, load {p['load1']:.1f}: reads {[round(ms) for ms in p['read_ms']]} ms;"
            f" per chunk {p['packets_per_chunk']:.0f} packets of {p['bytes_per_packet']:.0f} B, {cpu}"
        )
    print("load average per round:", [f"{s['condition']}:{s['load1']:.1f}" for s in result["samples"]])
    for case, row in result["summary"].items():
        cells = "  ".join(
            f"{c}: open {v['open_ms']:.1f} ms, read {v['read_ms']:.1f} ms ({v['gib_s']:.2f} GiB/s)"
            for c, v in row.items()
        )
        print(f"{case:45} {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
