"""The Raft leader of a charts/curvine release deleted, and how long until metadata answers again.

A probe runs in a surviving master's pod from before the delete (the pods share this machine's clock): it
asks `cv report json` until the answer names a leader other than the deleted one, or names any leader after
a report found none (elected: the StatefulSet starts the deleted master again under its name, and it may win
the election; a survivor's answer before the election may still name the old leader), then makes a
directory (a metadata write, committed by the new leader with a quorum of two of three) until that works,
then asks `cv report` until the new leader counts every worker live again. Each time is counted from the
moment before the delete. Curvine v0.4.1's Raft ticks once a second and elects after 10-30 ticks without a
leader (`raft_tick_interval_ms`, `raft_min/max_election_ticks` in crates/common/curvine-config/src/
journal_conf.rs). The last step matters for reads: a new leader knows each block's worker ids from the
journal but resolves them only among the workers that have sent it a heartbeat, and answers "all replicas
has been lost" (EIO through FUSE) until then (curvine-master/src/master/fs/worker_manager.rs,
`create_locate_block`); a worker retries its heartbeat with growing pauses (crates/core/rpc/src/client/
cluster_connector.rs, `rpc`), so it can reach the new leader seconds after the election.
"""

from __future__ import annotations

import concurrent.futures
import secrets
import time
from dataclasses import dataclass

from kvtier.cluster.realnode import curvine_observe
from kvtier.cluster.realnode.client import Kube
from kvtier.cluster.realnode.curvine_release import Installed

# $1 the deleted leader's pod, $2 the directory to make, $3 seconds to try, $4 the workers to wait for.
# `timeout` bounds each call: the client keeps retrying a dead master for far longer.
PROBE = """
old="$1"; dir="$2"; end=$(( $(date +%s) + $3 )); elected=""; wrote=""; gap=""
echo started
while [ "$(date +%s)" -lt "$end" ]; do
  if [ -z "$elected" ]; then
    active=$(timeout 5 CV report json 2>/dev/null | sed -n 's/.*"active_master": *"\\([^".:]*\\).*/\\1/p')
    if [ -z "$active" ]; then gap=1
    elif [ "$active" != "$old" ] || [ -n "$gap" ]; then elected="$(date +%s.%N) $active"; fi
  fi
  if [ -n "$elected" ] && [ -z "$wrote" ] && timeout 5 CV fs mkdir -p "$dir" >/dev/null 2>&1; then
    wrote="$(date +%s.%N)"
  fi
  if [ -n "$wrote" ]; then
    live=$(timeout 5 CV report 2>/dev/null | sed -n 's/.*live_worker_num: *\\([0-9]*\\).*/\\1/p')
    if [ "${live:-0}" -ge "$4" ]; then
      echo "elected $elected"; echo "wrote $wrote"; echo "workers $(date +%s.%N)"; exit 0
    fi
  fi
  sleep 0.2
done
echo "not done within $3 s (elected: ${elected:-none}, wrote: ${wrote:-never}, live workers: ${live:-?})"
exit 1
""".replace("CV", curvine_observe.CV)


@dataclass(frozen=True)
class Failover:
    old_leader: str
    new_leader: str
    elected_s: float  # from the delete until a report named another leader
    write_s: float  # from the delete until a metadata write went through
    workers_s: float  # from the delete until the new leader counted every worker live (blocks resolve)


def delete_leader(kube: Kube, installed: Installed, limit: float = 180) -> Failover:
    """Delete the leader's pod (its StatefulSet starts it again) and time the election, the first write
    and the workers' return after it, probing from another master."""
    masters = curvine_observe.pods(kube, installed, "master")
    old = curvine_observe.leader_pod(curvine_observe.report(kube, installed, sorted(masters)[0]))
    survivor = sorted(p for p in masters if p != old)[0]
    folder = f"/kvtier-failover-{secrets.token_hex(3)}"
    script = f"{PROBE}\n"
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        probe = pool.submit(
            curvine_observe.in_pod,
            kube, installed, survivor,
            f"set -- {old} {folder} {int(limit)} {installed.workers}\n{script}",
            limit + 60,
        )  # fmt: skip
        time.sleep(3)  # the probe's exec under way, still answered by the old leader
        start = time.time()
        kube.kubectl("delete", "pod", "-n", installed.namespace, old, "--wait=false")
        out = probe.result()
    lines = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    elected_at, new = lines["elected"].split()
    return Failover(
        old, new, float(elected_at) - start, float(lines["wrote"]) - start, float(lines["workers"]) - start
    )
