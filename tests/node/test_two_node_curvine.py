"""charts/curvine on two real nodes as production lays it out (curvine_release.install(spread=True),
kvtier.cluster.realnode.curvine_nodes): three Raft masters over both nodes, a worker in each node's
network on that node's own folder, the CSI node plugin on both. Lean on purpose (CI runs it): the release
Ready with one Raft group and a worker per node, Curvine's own `helm test` with its cross-node Job, one
chunk written on node 1 and read on node 2 from node 1's worker, and one leader failover.

The cluster is this module's own (two nodes), not the session's one-node cluster. Figures the tests see are
printed (`-s` shows them); docs/curvine-fuse.md, "Two nodes", records a run.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import textwrap
import time
from collections.abc import Iterator

import pytest

from kvtier.cluster.realnode import (
    curvine_failover,
    curvine_faults,
    curvine_observe,
    curvine_release,
)
from kvtier.cluster.realnode import lifecycle as realnode
from kvtier.cluster.realnode.client import Kube

CHUNK_MIB = 14  # one 256-token chunk of Qwen2-7B's KV, as benchmarks/curvine_bench.py writes


@pytest.fixture(scope="module")
def two_nodes(own_cluster) -> Iterator[realnode.RealCluster]:
    with own_cluster("-2n", nodes=2) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def kube2(two_nodes: realnode.RealCluster) -> Kube:
    return Kube(two_nodes)


@pytest.fixture(scope="module")
def spread(kube2: Kube, spread_curvine) -> Iterator[curvine_release.Installed]:
    with spread_curvine(kube2, "curvine2") as installed:
        yield installed


def _node_names(kube: Kube) -> tuple[str, str]:
    first, second = (node.name for node in kube.cluster.nodes)
    return first, second


def test_three_masters_form_one_raft_group_and_each_node_runs_a_worker(kube2, spread) -> None:
    nodes = set(_node_names(kube2))
    masters = curvine_observe.pods(kube2, spread, "master")
    print(f"[2 nodes] masters on nodes: {masters}")
    assert len(masters) == 3 and set(masters.values()) == nodes, masters
    states = curvine_observe.master_states(kube2, spread)
    print(f"[2 nodes] master states: {states}")
    assert sorted(states.values()) == ["Active", "Standby", "Standby"], states
    info = curvine_observe.report(kube2, spread, sorted(masters)[0])
    (active,) = [pod for pod, state in states.items() if state == "Active"]
    assert curvine_observe.leader_pod(info) == active, info["active_master"]
    assert len(info["journal_nodes"]) == 3, info["journal_nodes"]
    # Host-network workers register under their node's name (the chart's CURVINE_WORKER_HOSTNAME).
    assert curvine_observe.worker_hosts(info) == sorted(nodes), info["live_workers"]
    for component in ("worker", "csi-node"):
        placed = curvine_observe.pods(kube2, spread, component)
        assert sorted(placed.values()) == sorted(nodes), f"{component}: {placed}"


def test_curvines_own_helm_test_passes_with_its_cross_node_job(kube2, spread) -> None:
    proc = kube2.helm("helm3", "test", spread.release, "-n", spread.namespace, "--timeout", "5m", timeout=400)
    print(proc.stdout)
    suites = proc.stdout.split("TEST SUITE:")[1:]
    assert len(suites) == 2 and any("test-crossnode" in s for s in suites), proc.stdout
    assert all("Phase:          Succeeded" in s for s in suites), proc.stdout


# As the L2 writers (l2_blocks.py, l2_connector.py): a temp name made O_EXCL, page-aligned O_DIRECT writes,
# renamed over the final name; read whole with O_DIRECT. The bytes come from a seed, so the test knows them.
CONTENT = """
import hashlib, mmap
def content(seed, mib):
    out = mmap.mmap(-1, mib << 20)
    for i in range((mib << 20) // 32):
        out.write(hashlib.sha256(f'{seed}:{i}'.encode()).digest())
    return out
"""

WRITE = """
import json, os
os.makedirs('/l2/ns', exist_ok=True)
buf = content(SEED, MIB)
temp = f'/l2/ns/NAME.{os.getpid()}.tmp'
fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_DIRECT, 0o644)
os.write(fd, buf)
os.close(fd)
os.replace(temp, '/l2/ns/NAME')
print(json.dumps({'wrote': len(buf)}))
"""

READ = """
import hashlib, json, mmap, os, time
start = time.perf_counter()
fd = os.open('/l2/ns/NAME', os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, MIB << 20)
n = os.readv(fd, [buf])
os.close(fd)
seconds = time.perf_counter() - start
print(json.dumps({'read': n, 'sha256': hashlib.sha256(buf[:n]).hexdigest(), 'seconds': seconds}))
"""


def _expected(seed: str) -> str:
    digest = hashlib.sha256()
    for i in range((CHUNK_MIB << 20) // 32):
        digest.update(hashlib.sha256(f"{seed}:{i}".encode()).digest())
    return digest.hexdigest()


def _run(kube: Kube, installed, node: str, script: str, name: str, seed: str) -> dict:
    """`script` in a pod of its own on `node`, with the chart's claim at /l2; what it printed last."""
    claim = _chart_claim(kube, installed)
    code = textwrap.dedent(CONTENT) + script.replace("NAME", name).replace("SEED", repr(seed))
    pod_name = f"p-{secrets.token_hex(3)}"
    pod = curvine_release.consumer_pod(
        kube.cluster, installed.namespace, pod_name, claim, ["-c", code.replace("MIB", str(CHUNK_MIB))], node
    )
    kube.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    phase = kube.wait_phase(installed.namespace, pod_name, {"Succeeded", "Failed"}, timeout=240)
    log = kube.kubectl("logs", "-n", installed.namespace, pod_name, check=False)
    # A finished pod still holds the claim (PVC protection), and the uninstall would wait for it.
    kube.kubectl("delete", "pod", "-n", installed.namespace, pod_name, "--wait=false")
    assert phase == "Succeeded", log
    return dict(json.loads(log.strip().splitlines()[-1]))


def _chart_claim(kube: Kube, installed) -> str:
    selector = f"app.kubernetes.io/instance={installed.release},app.kubernetes.io/component=storage"
    found = kube.kubectl("get", "pvc", "-n", installed.namespace, "-l", selector, "-o", "name").split()
    assert len(found) == 1, f"expected the chart's own claim (pvc.enabled) in {installed.namespace}: {found}"
    return found[0].removeprefix("persistentvolumeclaim/")


def _curvine_path(kube: Kube, installed, name: str) -> str:
    """The chunk's path in Curvine: the StorageClass's fsPath (chart default) / the PV's name / ns / name."""
    pv = kube.kubectl(
        "get",
        "pvc",
        _chart_claim(kube, installed),
        "-n",
        installed.namespace,
        "-o",
        "jsonpath={.spec.volumeName}",
    )
    return f"/l2cache/{pv}/ns/{name}"


def _cross_node_read(kube: Kube, installed, name: str, seed: str) -> dict:
    """Read chunk `name` on node 2; what the reader saw and what node 1's and node 2's workers streamed."""
    first, second = _node_names(kube)
    before = {n: curvine_observe.worker_reads(kube, installed, n) for n in (first, second)}
    seen = _run(kube, installed, second, READ, name, seed)
    after = {n: curvine_observe.worker_reads(kube, installed, n) for n in (first, second)}
    delta = {n: {k: after[n][k] - before[n][k] for k in after[n]} for n in (first, second)}
    return {**seen, "workers": delta}


@pytest.fixture(scope="module")
def chunk(kube2, spread) -> dict:
    """A chunk written by a pod on node 1 through the chart's claim: its name, seed and block hosts."""
    first, _ = _node_names(kube2)
    name, seed = "chunk.data", secrets.token_hex(4)
    assert _run(kube2, spread, first, WRITE, name, seed) == {"wrote": CHUNK_MIB << 20}
    masters = sorted(curvine_observe.pods(kube2, spread, "master"))
    hosts = curvine_observe.block_hosts(kube2, spread, masters[0], _curvine_path(kube2, spread, name))
    return {"name": name, "seed": seed, "hosts": hosts}


def test_a_chunk_written_on_node_1_is_read_on_node_2_from_node_1s_worker(kube2, spread, chunk) -> None:
    first, second = _node_names(kube2)
    # The `local` worker policy put the block on the writer's node (its FUSE client's hostname).
    assert chunk["hosts"] == [[first]], chunk["hosts"]
    seen = _cross_node_read(kube2, spread, chunk["name"], chunk["seed"])
    size = CHUNK_MIB << 20
    print(
        f"[2 nodes] {CHUNK_MIB} MiB chunk read on {second} from {first}'s worker in"
        f" {seen['seconds'] * 1000:.1f} ms ({size / seen['seconds'] / 2**30:.2f} GiB/s, O_DIRECT);"
        f" worker counters {seen['workers']}"
    )
    assert (seen["read"], seen["sha256"]) == (size, _expected(chunk["seed"]))
    # Streamed by node 1's worker through its RPC (no short-circuit across nodes); node 2's served nothing.
    assert seen["workers"][first]["remote"] >= 1 and seen["workers"][first]["bytes"] >= size, seen
    assert seen["workers"][second]["bytes"] == 0 and seen["workers"][second]["remote"] == 0, seen


def test_a_follower_deleted_under_the_load_fails_no_op_and_reads_no_wrong_byte(kube2, spread) -> None:
    """Row 2 of docs/curvine-fuse.md's fault table, bounded: a Standby master's pod deleted while a load pod
    on each node writes and reads chunks (kvtier.cluster.realnode.curvine_faults) costs nothing; the leader
    keeps its quorum of two. Short reads (a chunk read before its writer's release, with or without a
    fault) are counted apart and are not failures here."""
    loads = curvine_faults.start_load(kube2, spread)
    try:
        time.sleep(10)  # each node's first chunks written, so reads of the other's find one
        states = curvine_observe.master_states(kube2, spread)
        follower = sorted(pod for pod, state in states.items() if state == "Standby")[0]
        start = time.time()
        kube2.kubectl("delete", "pod", "-n", spread.namespace, follower, "--wait=false")
        time.sleep(20)
        end = time.time()
        lines = curvine_faults.ops(kube2, spread, loads)
    finally:
        curvine_faults.stop_load(kube2, spread, loads)
    seen = {f"{op} {of}": curvine_faults.outage(lines, op, of, start, end) for op, of in curvine_faults.KINDS}
    print(f"[2 nodes] follower {follower} deleted under the load: {seen}")
    for kind, outage in seen.items():
        assert outage.ops > 0 and outage.wrong == 0, (kind, outage)
        assert outage.failed == outage.short and outage.resumed, (kind, outage)
        # Measured 0 s (2026-12-07); an op over SLOW_S on a loaded machine counts, so allow one.
        assert outage.unavailable_s <= 2 * curvine_faults.SLOW_S, (kind, outage)
    curvine_release.wait_ready(kube2, spread)
    states = curvine_observe.master_states(kube2, spread)
    assert sorted(states.values()) == ["Active", "Standby", "Standby"], states


def test_after_the_leader_is_deleted_a_new_one_answers_and_chunks_read_and_write(
    kube2, spread, chunk
) -> None:
    first, second = _node_names(kube2)
    failover = curvine_failover.delete_leader(kube2, spread)
    print(
        f"[2 nodes] leader {failover.old_leader} deleted: {failover.new_leader} elected after"
        f" {failover.elected_s:.1f} s, first metadata write after {failover.write_s:.1f} s, both workers"
        f" live on the new leader after {failover.workers_s:.1f} s"
    )
    masters = curvine_observe.pods(kube2, spread, "master")
    assert failover.new_leader in masters, failover  # the deleted master may win again under its name
    assert failover.elected_s <= failover.write_s <= failover.workers_s, failover
    # Once the workers are back, the chunk written before reads on node 2, and a chunk written now on node 1
    # reads there too (before that a read may get EIO: curvine_failover's docstring).
    seen = _cross_node_read(kube2, spread, chunk["name"], chunk["seed"])
    assert seen["sha256"] == _expected(chunk["seed"]), seen
    seed = secrets.token_hex(4)
    assert _run(kube2, spread, first, WRITE, "after-failover.data", seed) == {"wrote": CHUNK_MIB << 20}
    assert _cross_node_read(kube2, spread, "after-failover.data", seed)["sha256"] == _expected(seed)
    # The deleted master came back as a follower of the one group.
    curvine_release.wait_ready(kube2, spread)
    states = curvine_observe.master_states(kube2, spread)
    print(f"[2 nodes] master states after the failover: {states} (nodes {first}, {second})")
    assert sorted(states.values()) == ["Active", "Standby", "Standby"], states
