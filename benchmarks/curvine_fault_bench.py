#!/usr/bin/env python3
"""Curvine's faults across two real nodes, under a client load (issue 63, item 4).

One run, one two-node real-node cluster of its own (fault-bench-<pid>, taken down at the end) with
charts/curvine laid out as production does (three Raft masters, a worker and a CSI node plugin per node:
curvine_release.install(spread=True)). A load pod on each node writes chunks through the chart's claim and
reads back its own newest chunk and the other node's (kvtier.cluster.realnode.curvine_faults), while the
faults below come one after another, each followed by a quiet stretch; every op's line says when it
started, how long it took, whether it failed (errno) and whether its bytes were wrong.

    .venv/bin/python benchmarks/curvine_fault_bench.py [--faults leader,follower,...] [-o table|json]
        [--cut-s 60] [--settle-s 20] [--set KEY=VALUE ...] [--out DIR]

writes DIR/curvine-faults.json (the table's figures) and DIR/curvine-faults-ops.jsonl (every op).

Faults (FAULTS, in this order): the Raft leader's pod deleted; a follower's; every master and worker
rolled by a `helm upgrade` (a pod annotation) while the load keeps its mounts; every master and worker pod
deleted at once (what issue 63 saw outside Kubernetes); node 2's link cut (its end of the veth pair down:
its kubelet, worker, node plugin, master and load pod all unreachable) with `config.replicas: 1`, and
node 2 back; node 2 stopped with its link up (its kubelet, containerd and every process of its cgroup
SIGKILLed, as a power-off: curvine_faults.stop_node) and started again (its containerd and kubelet, as a
reboot; its load pod started anew when the kubelet does not), still `config.replicas: 1`; then, after an
upgrade to `config.replicas: 2` with new mounts (the node plugins restarted while no pod holds the claim:
a FUSE client reads the config when it mounts), the cut and the return again.

Needs root, the node programs (make node-tools) and the Curvine binaries. Exit 0 when no op read wrong
bytes, 1 when one did, 2 when the cluster or the install cannot start.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kvtier import cliopts, waiting
from kvtier.cluster.realnode import (
    curvine_binaries,
    curvine_failover,
    curvine_faults,
    curvine_observe,
    curvine_release,
)
from kvtier.cluster.realnode import lifecycle as realnode
from kvtier.cluster.realnode.client import Kube
from kvtier.cluster.realnode.curvine_release import Installed
from kvtier.errors import UserError

FAULTS = (
    "leader", "follower", "upgrade", "all-at-once", "cut-r1", "back-r1", "stop-r1", "start-r1", "cut-r2",
    "back-r2",
)  # fmt: skip
ROLL = (  # a string, as the chart's schema wants: `--set` makes 1 a number and helm refuses the upgrade
    "--set-string", "master.podAnnotations.kvtier-roll=1",
    "--set-string", "worker.podAnnotations.kvtier-roll=1",
)  # fmt: skip


def _settle(seconds: float) -> None:
    time.sleep(seconds)


def _wait_release(kube: Kube, installed: Installed) -> None:
    curvine_release.wait_ready(kube, installed, timeout=400)


def _leader(kube: Kube, installed: Installed) -> dict[str, Any]:
    failover = curvine_failover.delete_leader(kube, installed)
    _wait_release(kube, installed)
    return {k: round(v, 1) if isinstance(v, float) else v for k, v in asdict(failover).items()}


def _follower(kube: Kube, installed: Installed) -> dict[str, Any]:
    states = curvine_observe.master_states(kube, installed)
    standby = sorted(p for p, s in states.items() if s == "Standby")[0]
    kube.kubectl("delete", "pod", "-n", installed.namespace, standby, "--wait=false")
    started = time.time()
    _wait_release(kube, installed)
    return {"deleted": standby, "ready_s": round(time.time() - started, 1)}


def _upgrade(kube: Kube, installed: Installed, *flags: str) -> dict[str, Any]:
    started = time.time()
    curvine_release.helm_upgrade(kube, installed, *flags)
    return {"flags": " ".join(flags), "upgrade_s": round(time.time() - started, 1)}


def _all_at_once(kube: Kube, installed: Installed) -> dict[str, Any]:
    started = time.time()
    selector = (
        f"app.kubernetes.io/instance={installed.release},app.kubernetes.io/component in (master,worker)"
    )
    kube.kubectl("delete", "pods", "-n", installed.namespace, "-l", selector, "--wait=false")
    time.sleep(5)
    _wait_release(kube, installed)
    return {"ready_s": round(time.time() - started, 1)}


def _workers_live(kube: Kube, installed: Installed, limit: float) -> float | None:
    """Seconds until the master counts every worker live again; None past `limit`."""
    started = time.time()
    try:
        waiting.wait_until(
            lambda: curvine_release.live_workers(kube, installed) >= installed.workers,
            deadline=waiting.deadline_in(limit),
            fail=lambda _: TimeoutError(),
            interval=1,
        )
    except TimeoutError:
        return None
    return round(time.time() - started, 1)


class Run:
    """The cluster, the release, the load pods and every fault's window and facts."""

    def __init__(
        self, kube: Kube, installed: Installed, args: argparse.Namespace, say: Callable[[str], None]
    ):
        self.kube, self.installed, self.args, self.say = kube, installed, args, say
        self.loads: list[str] = []
        self.windows: list[dict[str, Any]] = []
        self.routes: list[str] = []
        self.ops: list[dict[str, Any]] = []
        self.windows_start = 0.0  # when the current fault's window began
        self.generation = 1  # of the load's chunk names
        self.stopped_at = 0.0

    def fault(self, name: str, act: Callable[[], dict[str, Any]], settle: float) -> None:
        self.say(f"fault {name}")
        start = self.windows_start = time.time()
        try:
            facts = act()
        except Exception as error:  # a fault that could not be produced is reported, not fatal
            said = f"{type(error).__name__}: {error}"
            facts = {"not_measured": said if len(said) < 2000 else f"{said[:1000]} ... {said[-1000:]}"}
        _settle(settle)
        self.windows.append({"fault": name, "start": start, "end": time.time(), "facts": facts})
        self.say(f"fault {name}: {facts}")

    def collect(self) -> None:
        for name in self.loads:  # each pod alone: a pod of a stopped node may have no log to give
            try:
                self.ops += curvine_faults.ops(self.kube, self.installed, [name])
            except AssertionError as error:
                self.say(f"no log from {name}: {str(error)[:300]}")

    def leader(self) -> str:
        """The Raft leader's pod, asked from master-0 (on node 1: it answers while node 2 is cut off)."""
        try:
            info = curvine_observe.report(
                self.kube, self.installed, curvine_release.master_pod(self.installed)
            )
            return curvine_observe.leader_pod(info)
        except Exception as error:
            return f"unknown: {error}"[:200]

    def cut(self) -> dict[str, Any]:
        leader = self.leader()
        self.routes = curvine_faults.cut_link(self.kube.cluster)
        held = time.time()
        cut_at = held - self.windows_start
        live = curvine_release.live_workers(self.kube, self.installed)  # one look: not yet noticed
        time.sleep(self.args.cut_s)
        return {
            "link": "node 2's kvt1 down", "cut_after_s": round(cut_at, 1),
            "held_s": round(time.time() - held, 1), "live_at_cut": live,
            "leader_before": leader, "leader_during": self.leader(),
            "live_during": curvine_release.live_workers(self.kube, self.installed),
        }  # fmt: skip

    def back(self) -> dict[str, Any]:
        curvine_faults.restore_link(self.kube.cluster, self.routes)
        return {"workers_live_s": _workers_live(self.kube, self.installed, 300), "leader": self.leader()}

    def stop(self) -> dict[str, Any]:
        """Node 2 powered off, its link up, for --cut-s seconds; the load's lines collected first (node 2's
        pod may not come back with its log)."""
        self.collect()
        leader = self.leader()
        # What dies with it: a master there, or the cluster DNS's only replica, changes what node 1 sees.
        on_node_2 = sorted(curvine_faults.node_pods(self.kube, self.kube.cluster.nodes[1].name, 0))
        killed = curvine_faults.stop_node(self.kube.cluster)
        self.stopped_at = time.time()
        stop_at = self.stopped_at - self.windows_start
        time.sleep(self.args.cut_s)
        return {
            "stopped": "node 2's kubelet, containerd, every process of its cgroup (SIGKILL)",
            "pods_on_node_2": on_node_2, "processes_killed": killed, "stop_after_s": round(stop_at, 1),
            "held_s": round(time.time() - self.stopped_at, 1), "leader_before": leader,
            "leader_during": self.leader(),
            "live_during": curvine_release.live_workers(self.kube, self.installed),
        }  # fmt: skip

    def start(self) -> dict[str, Any]:
        """Node 2 started again: until it is Ready, until both workers are live and until each of its pods
        runs Ready again (seconds from the start); its load pod started anew when the kubelet did not."""
        started = time.time()
        curvine_faults.start_node(self.kube.cluster, self.say)
        facts: dict[str, Any] = {"node_ready_s": round(time.time() - started, 1)}
        second = self.kube.cluster.nodes[1].name
        load = f"{self.installed.namespace}/{curvine_faults.pod_name(second)}"
        back: dict[str, float] = {}
        pods: dict[str, dict[str, Any]] = {}
        live = None
        while time.time() - started < 300:
            pods = curvine_faults.node_pods(self.kube, second, self.stopped_at)
            back |= {
                k: round(time.time() - started, 1) for k, v in pods.items() if v["back"] and k not in back
            }
            if (
                live is None
                and curvine_release.live_workers(self.kube, self.installed) >= self.installed.workers
            ):
                live = round(time.time() - started, 1)
            if live is not None and all(k in back for k in pods if k != load):
                break
            time.sleep(2)
        facts |= {"workers_live_s": live, "pods_back_s": back, "leader": self.leader()}
        facts["pods_not_back"] = {k: v for k, v in pods.items() if k not in back}
        if load not in back:
            # a bare pod with restartPolicy Never: nothing but the kubelet would start it again
            self.loads = [n for n in self.loads if not load.endswith(f"/{n}")]
            self.loads.append(curvine_faults.replace_load(self.kube, self.installed, 2, self.generation))
            facts["load_replaced_running_s"] = round(time.time() - started, 1)
        return facts

    def replicas_two(self) -> dict[str, Any]:
        """config.replicas 2 with fresh mounts: the load stopped, the upgrade, the node plugins restarted."""
        self.collect()
        curvine_faults.stop_load(self.kube, self.installed, self.loads)
        self.loads = []
        facts = _upgrade(self.kube, self.installed, "--set", "config.replicas=2")
        selector = f"app.kubernetes.io/instance={self.installed.release},app.kubernetes.io/component=csi-node"
        self.kube.kubectl("delete", "pods", "-n", self.installed.namespace, "-l", selector)
        _wait_release(self.kube, self.installed)
        self.generation = 2
        self.loads = curvine_faults.start_load(self.kube, self.installed, generation=2)
        time.sleep(self.args.settle_s)
        facts["node2_chunk_hosts"] = self.chunk_hosts()
        return facts

    def chunk_hosts(self) -> Any:
        """The workers holding node 2's newest chunk (`cv fs blocks`), to show what replicas gave."""
        second = self.kube.cluster.nodes[1].name
        lines = curvine_faults.ops(self.kube, self.installed, self.loads)
        written = [x["name"] for x in lines if x["op"] == "write" and x["ok"] and x["node"] == second]
        if not written:
            return "no chunk written on node 2"
        pv = self.kube.kubectl(
            "get", "pvc", curvine_faults.chart_claim(self.kube, self.installed), "-n",
            self.installed.namespace, "-o", "jsonpath={.spec.volumeName}",
        )  # fmt: skip
        master = sorted(curvine_observe.pods(self.kube, self.installed, "master"))[0]
        try:
            return curvine_observe.block_hosts(
                self.kube, self.installed, master, f"/l2cache/{pv}/ns/{written[-1]}"
            )
        except Exception as error:
            return f"unknown: {error}"[:200]


def measure(run: Run, faults: list[str]) -> None:
    kube, installed, settle = run.kube, run.installed, run.args.settle_s
    run.loads = curvine_faults.start_load(kube, installed)
    time.sleep(10)  # each pod's first chunk written, so reads of the other's have something to find
    baseline = time.time()
    time.sleep(settle)
    run.windows.append({"fault": "baseline", "start": baseline, "end": time.time(), "facts": {}})
    actions: dict[str, tuple[Callable[[], dict[str, Any]], float]] = {
        "leader": (lambda: _leader(kube, installed), settle),
        "follower": (lambda: _follower(kube, installed), settle),
        "upgrade": (lambda: _upgrade(kube, installed, *ROLL), settle),
        "all-at-once": (lambda: _all_at_once(kube, installed), settle),
        "cut-r1": (run.cut, 0),
        "back-r1": (run.back, settle),
        "stop-r1": (run.stop, 0),
        "start-r1": (run.start, settle),
        "cut-r2": (run.cut, 0),
        "back-r2": (run.back, settle),
    }
    for name in faults:
        if name == "cut-r2":
            run.fault("replicas-2", run.replicas_two, 0)
        act, wait = actions[name]
        run.fault(name, act, wait)
    run.collect()


def summarize(ops: list[dict[str, Any]], windows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each fault's window of the load's ops summed per kind of op (curvine_faults.outage)."""
    seen = {(x["node"], x["op"], x["of"], x["t"]): x for x in ops}
    ops = sorted(seen.values(), key=lambda x: x["t"])
    rows = []
    for window in windows:
        kinds = {
            f"{op} {of}": asdict(curvine_faults.outage(ops, op, of, window["start"], window["end"]))
            for op, of in curvine_faults.KINDS
        }
        rows.append({k: window[k] for k in ("fault", "start", "end", "facts")} | {"kinds": kinds})
    wrong = sum(bool(x["wrong"]) for x in ops)
    short = sum(bool(x.get("short")) for x in ops)
    return {
        "ops": len(ops), "wrong": wrong, "short": short, "rows": rows,
        "chunk_mib": curvine_faults.CHUNK_MIB, "log": ops,
    }  # fmt: skip


def resummarize(folder: Path) -> dict[str, Any]:
    """A saved run (its curvine-faults.json windows and curvine-faults-ops.jsonl) summed again."""
    saved = json.loads((folder / "curvine-faults.json").read_text())
    lines = (folder / "curvine-faults-ops.jsonl").read_text().splitlines()
    return summarize([json.loads(line) for line in lines], saved["rows"])


def run_bench(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    def say(message: str) -> None:
        console.print(f"[dim]{message}", highlight=False)

    name = f"fault-bench-{os.getpid()}"
    cluster = realnode.up(name, nodes=2, progress=say)
    try:
        kube = Kube(cluster)
        with curvine_release.raised_pipe_max_size():
            sets = [flag for pair in args.set for flag in ("--set", pair)]
            installed = curvine_release.install(kube, f"faults-{os.getpid()}", say, *sets, spread=True)
            run = Run(kube, installed, args, say)
            try:
                measure(run, args.faults)
            finally:
                if run.routes:  # never leave node 2 cut off
                    curvine_faults.restore_link(cluster, run.routes)
                try:
                    run.collect()  # again after a failure: summarize drops the repeats
                except Exception as error:
                    say(f"could not collect the load's logs: {error}")
                curvine_faults.stop_load(kube, installed, run.loads)
                curvine_release.remove(kube, installed)
        return summarize(run.ops, run.windows)
    finally:
        realnode.down(name, progress=say)


def _cell(out: dict[str, Any]) -> str:
    """Each node's unavailability (node 1 / node 2), then the ops that failed, were short or WRONG."""
    if not out["ops"] and not any(out["by_node"].values()):
        return "no ops"
    gone = " / ".join(f"{s:.1f}" for s in out["by_node"].values()) + " s"
    said = f"{gone}{'' if out['resumed'] else ' (not resumed)'}; {out['failed']}/{out['ops']} failed"
    said += f", slowest {out['slowest_ms'] / 1000:.1f} s"
    return (
        said
        + (f", {out['short']} short" if out["short"] else "")
        + (f", {out['wrong']} WRONG" if out["wrong"] else "")
    )


def show(payload: dict[str, Any], console: Console) -> None:
    table = Table(title=f"Curvine faults across two nodes ({payload['chunk_mib']} MiB chunks, O_DIRECT)")
    for column in ("fault", "writes", "reads own", "reads other", "errors seen", "facts"):
        table.add_column(column, overflow="fold")
    for row in payload["rows"]:
        kinds = row["kinds"]
        errors: dict[str, int] = {}
        for key in ("write own", "read own", "read other"):
            for said, count in kinds[key]["errors"].items():
                errors[said] = errors.get(said, 0) + count
        table.add_row(
            row["fault"],
            _cell(kinds["write own"]),
            _cell(kinds["read own"]),
            _cell(kinds["read other"]),
            "; ".join(f"{count}x {said}" for said, count in errors.items())[:400],
            json.dumps(row["facts"])[:300],
        )
    console.print(table)
    console.print(
        f"ops: {payload['ops']}, wrong bytes: {payload['wrong']} (goal 0), short reads: {payload['short']}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--faults", type=lambda s: s.split(","), default=list(FAULTS),
        help=f"comma-separated, in this order: {','.join(FAULTS)}",
    )  # fmt: skip
    parser.add_argument("--cut-s", type=float, default=60, help="seconds node 2 stays cut off")
    parser.add_argument("--settle-s", type=float, default=20, help="seconds of load after each fault")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE",
        help="a chart value for the install (repeatable, as helm's --set), e.g. "
        "config.client.rpcTimeoutMs=20000; the upgrade faults re-render without it",
    )  # fmt: skip
    cliopts.add_output(parser, json_alias=False)
    parser.add_argument(
        "--out", type=Path, default=Path("bench-results"), help="folder for curvine-faults.json"
    )
    parser.add_argument(
        "--from", dest="saved", type=Path, help="sum a saved run's folder again (no cluster) and show it"
    )
    args = parser.parse_args()
    console = Console(width=200)
    unknown = [f for f in args.faults if f not in FAULTS]
    if unknown:
        console.print(f"[red]curvine fault bench: --faults {','.join(unknown)}: expected some of {FAULTS}")
        return 2
    args.faults = [f for f in FAULTS if f in args.faults]
    if args.saved:
        try:
            payload = resummarize(args.saved)
        except (OSError, ValueError, KeyError) as error:
            console.print(f"[red]curvine fault bench: --from {args.saved}: not a saved run ({error})")
            return 2
        payload.pop("log")
        print(json.dumps(payload, indent=2)) if args.output == "json" else show(payload, console)
        return 0 if payload["wrong"] == 0 else 1
    reasons = realnode.preconditions() + [r for r in [curvine_binaries.missing()] if r]
    if reasons:
        console.print(f"[red]curvine fault bench: cannot run here: {'; '.join(reasons)}")
        return 2
    try:
        payload = run_bench(args, console)
    except (UserError, AssertionError) as error:
        console.print(f"[red]curvine fault bench: {error}")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    log = payload.pop("log")
    (args.out / "curvine-faults.json").write_text(json.dumps(payload, indent=2) + "\n")
    (args.out / "curvine-faults-ops.jsonl").write_text("".join(json.dumps(x) + "\n" for x in log))
    if args.output == "json":
        print(json.dumps(payload, indent=2))
    else:
        show(payload, console)
    return 0 if payload["wrong"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
