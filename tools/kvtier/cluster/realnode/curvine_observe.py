"""What a running charts/curvine release says about itself, asked the ways Curvine v0.4.1 answers (source
lines are CurvineIO/curvine at v0.4.1, commit 709f247):

- `cv report json` (curvine-cli/src/cmds/report.rs): the leader's MasterInfo, through the client, which
  finds the leader among `master_addrs`: `active_master` (the leader's `<hostname>:<rpc port>`, the
  hostname its pod's DNS name), `journal_nodes` (the Raft peers), `live_workers` (each `address.hostname`);
- each master's `/api/overview` on its web port (curvine-master/src/master/router_handler.rs): its own
  `master_state`, `Active` on the Raft leader and `Standby` on followers (master_monitor.rs);
- `cv fs blocks <path> --format json` (curvine-cli/src/cmds/fs/blocks.rs): each block's workers;
- a worker's `/metrics` on its web port: `read_blocks{type="local"|"remote"}` counts block reads opened
  short-circuit or streamed through its RPC, `read_bytes` the bytes it streamed
  (curvine-worker/src/worker/handler/read_handler.rs).

Everything runs inside the release's own pods (the image has `cv` and curl): the cluster's names resolve
only there.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kvtier import curvine_report, paths
from kvtier.cluster.realnode.client import Kube
from kvtier.cluster.realnode.curvine_release import Installed

CV = curvine_report.CV
# The report's pure parts live in kvtier.curvine_report (kvtier soak's Curvine faults read them too).
leader_pod = curvine_report.leader_pod
worker_hosts = curvine_report.worker_hosts


def in_pod(kube: Kube, installed: Installed, pod: str, script: str, timeout: float = 60) -> str:
    """`sh -c script` in `pod` of the release; its stdout (Curvine's CLI logs to stderr)."""
    return kube.run(
        [str(paths.TOOLS_BIN / "kubectl"), "exec", "-n", installed.namespace, pod, "--", "sh", "-c", script],
        timeout=timeout,
    )


def pods(kube: Kube, installed: Installed, component: str) -> dict[str, str]:
    """The release's pods of `component` (master, worker, csi-node): pod name -> node name."""
    selector = f"app.kubernetes.io/instance={installed.release},app.kubernetes.io/component={component}"
    items = json.loads(kube.kubectl("get", "pods", "-n", installed.namespace, "-l", selector, "-o", "json"))
    return {i["metadata"]["name"]: i["spec"].get("nodeName", "") for i in items["items"]}


def report(kube: Kube, installed: Installed, pod: str) -> dict[str, Any]:
    """The leader's MasterInfo (`cv report json`), asked from `pod`."""
    return curvine_report.parse(in_pod(kube, installed, pod, curvine_report.REPORT_SCRIPT))


def master_states(kube: Kube, installed: Installed, web_port: int = 9000) -> dict[str, str]:
    """Each master pod's own `master_state` (its /api/overview); "unreachable" when it does not answer."""
    states = {}
    for pod in pods(kube, installed, "master"):
        out = kube.run(
            [str(paths.TOOLS_BIN / "kubectl"), "exec", "-n", installed.namespace, pod, "--",
             "curl", "-sS", "--max-time", "5", f"http://127.0.0.1:{web_port}/api/overview"],
            check=False,
        )  # fmt: skip
        found = re.search(r'"master_state"\s*:\s*"(\w+)"', out)
        states[pod] = found.group(1) if found else "unreachable"
    return states


def block_hosts(kube: Kube, installed: Installed, pod: str, path: str) -> list[list[str]]:
    """For each block of Curvine file `path`, the hostnames of the workers that hold it."""
    out = in_pod(kube, installed, pod, f"{CV} fs blocks {path} --format json 2>/dev/null")
    blocks = json.loads(out[out.index("{") :])
    return [[loc["hostname"] for loc in block["locs"]] for block in blocks["block_locs"]]


def worker_reads(kube: Kube, installed: Installed, node: str, web_port: int = 9001) -> dict[str, float]:
    """The read counters of the worker on `node` (its /metrics): `local` and `remote` block opens,
    `bytes` streamed through its RPC."""
    (pod,) = [p for p, n in pods(kube, installed, "worker").items() if n == node]
    text = in_pod(kube, installed, pod, f"curl -sS --max-time 5 http://127.0.0.1:{web_port}/metrics")
    counters = {"local": 0.0, "remote": 0.0, "bytes": 0.0}
    for line in text.splitlines():
        blocks = re.match(r'\w*read_blocks\{type="(local|remote)"\}\s+(\S+)', line)
        if blocks:
            counters[blocks.group(1)] = float(blocks.group(2))
        streamed = re.match(r"\w*read_bytes\s+(\S+)", line)
        if streamed:
            counters["bytes"] = float(streamed.group(1))
    return counters
