"""charts/curvine as it renders, running under the real node's kubelet (kvtier.cluster.realnode.
curvine_release): the master and worker, the CSI controller provisioning a ReadWriteMany claim, the node
plugin mounting curvine-fuse into pods, `helm test`, and what the shared L2 relies on through that mount,
then the lifecycle: an upgrade, a worker and a master restart, the node plugin restarted under a mounted pod.

Every reader and writer runs as the engines' user (uid 1000) in its own pod. The cluster has one node, so
"another pod" here means another FUSE client process on the same node, not another node (the chart's own
cross-node test needs two nodes; docs/cluster.md).
"""

from __future__ import annotations

import json
import secrets
import textwrap
from pathlib import Path

import pytest

from kvtier import waiting
from kvtier.cluster.realnode import curvine_release, umbrella_cpu
from kvtier.cluster.realnode.client import Kube
from kvtier.podscripts import l2_hits
from kvtier.upstream import curvine_config

RUN_AS = umbrella_cpu.RUN_AS  # the engines' runAsUser and fsGroup in the umbrella chart
CLAIM = "shared"


def _claim(kube: Kube, ns: str) -> None:
    kube.kubectl("apply", "-f", "-", stdin=json.dumps(curvine_release.claim(ns, CLAIM)))
    kube.kubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Bound", f"pvc/{CLAIM}", "--timeout=120s")


def run_pod(kube: Kube, cluster, ns: str, script: str, *, keep: bool = False) -> tuple[str, str]:
    """Run `script` (Python) in a new pod as uid 1000 with the claim at /l2; (phase, log). `keep`: leave
    the pod running after the script (it sleeps), for a test that acts while the mount is in use."""
    name = f"p-{secrets.token_hex(3)}"
    tail = "\nimport time; print('READY', flush=True); time.sleep(3600)" if keep else ""
    pod = curvine_release.consumer_pod(cluster, ns, name, CLAIM, ["-c", textwrap.dedent(script) + tail])
    kube.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    if keep:
        waiting.wait_until(
            lambda: "READY" in kube.kubectl("logs", "-n", ns, name, check=False),
            deadline=waiting.deadline_in(120),
            fail=lambda _: AssertionError(kube.kubectl("describe", "pod", "-n", ns, name, check=False)),
            interval=1,
        )
        return name, kube.kubectl("logs", "-n", ns, name)
    phase = kube.wait_phase(ns, name, {"Succeeded", "Failed"}, timeout=180)
    return phase, kube.kubectl("logs", "-n", ns, name, check=False)


@pytest.fixture(scope="module")
def shared(kube, curvine) -> str:
    """The namespace of the module's claim (on the Curvine StorageClass)."""
    ns = f"{curvine.namespace}-use"
    kube.kubectl("create", "namespace", ns)
    _claim(kube, ns)
    return ns


def test_the_master_reports_the_worker_and_helm_test_passes(kube, curvine) -> None:
    assert curvine_release.live_workers(kube, curvine) == 1
    proc = kube.helm(
        "helm3", "test", curvine.release, "-n", curvine.namespace, "--timeout", "5m", timeout=400
    )
    assert "Phase:          Succeeded" in proc.stdout, proc.stdout
    assert "Phase:          Failed" not in proc.stdout, proc.stdout


def test_the_controller_provisions_a_directory_the_engines_user_owns(kube, real_cluster, shared) -> None:
    pv = kube.kubectl("get", "pvc", CLAIM, "-n", shared, "-o", "jsonpath={.spec.volumeName}")
    driver = kube.kubectl("get", "pv", pv, "-o", "jsonpath={.spec.csi.driver}")
    assert driver == "curvine", f"{pv} is served by {driver!r}, not Curvine's CSI driver"
    phase, log = run_pod(
        kube,
        real_cluster,
        shared,
        """
        import json, os
        st = os.stat('/l2')
        fs = os.statvfs('/l2')
        mounts = [line.split()[2] for line in open('/proc/mounts') if line.split()[1] == '/l2']
        print(json.dumps({'uid': st.st_uid, 'gid': st.st_gid, 'mode': oct(st.st_mode & 0o777),
                          'fstype': mounts, 'total': fs.f_blocks * fs.f_frsize}))
        """,
    )
    assert phase == "Succeeded", log
    seen = json.loads(log.strip().splitlines()[-1])
    assert seen["fstype"] == ["fuse.curvinefs"], seen
    # volumeAccess (uid 1000, gid 1000, mode group): the engines' user owns the volume's directory.
    assert (seen["uid"], seen["gid"], seen["mode"]) == (RUN_AS, RUN_AS, "0o775"), seen
    # statfs reports the pool (the worker's data dir capacity, 2GB = 2 GiB to Curvine), not the claim's 1Gi.
    assert seen["total"] == curvine_config.size_bytes(curvine_release.DATA_CAPACITY), seen


# How the L2 writes and reads a chunk (l2_blocks.py, l2_connector.py): a temp name created O_EXCL, O_DIRECT
# where the KV is page-aligned, renamed over the final name (another writer may have won), read whole.
WRITER = """
import json, mmap, os
os.makedirs('/l2/ns', exist_ok=True)
page = mmap.mmap(-1, 1 << 20)
page.write(bytes(range(256)) * 4096)
for name in ('a', 'b'):  # b: a second writer of the same chunk, renamed over the first
    temp = f'/l2/ns/{name}.tmp'
    fd = os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_DIRECT, 0o644)
    os.write(fd, page)
    os.close(fd)
    os.replace(temp, '/l2/ns/chunk.data')
try:
    os.open('/l2/ns/chunk.data', os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    excl = 'created'
except FileExistsError:
    excl = 'EEXIST'
print(json.dumps({'excl': excl, 'files': sorted(os.listdir('/l2/ns'))}))
"""

READER = """
import hashlib, json, mmap, os
fd = os.open('/l2/ns/chunk.data', os.O_RDONLY | os.O_DIRECT)
buf = mmap.mmap(-1, 1 << 20)
n = os.readv(fd, [buf])
os.close(fd)
print(json.dumps({'read': n, 'sha256': hashlib.sha256(buf[:n]).hexdigest()}))
"""

EXPECTED_SHA256 = __import__("hashlib").sha256(bytes(range(256)) * 4096).hexdigest()


def _read_back(kube, cluster, ns: str) -> dict:
    phase, log = run_pod(kube, cluster, ns, READER)
    assert phase == "Succeeded", log
    return json.loads(log.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def chunk(kube, real_cluster, shared) -> dict:
    """/l2/ns/chunk.data on the module's claim, written once by WRITER in a pod of its own; what WRITER
    printed. Every test that reads the chunk asks for this, so each runs alone as well as in order."""
    phase, log = run_pod(kube, real_cluster, shared, WRITER)
    assert phase == "Succeeded", log
    return json.loads(log.strip().splitlines()[-1])


def test_a_chunk_written_in_one_pod_is_read_in_another_with_o_direct(
    kube, real_cluster, shared, chunk: dict
) -> None:
    assert chunk == {"excl": "EEXIST", "files": ["chunk.data"]}, chunk
    assert _read_back(kube, real_cluster, shared) == {"read": 1 << 20, "sha256": EXPECTED_SHA256}


def test_a_file_is_its_creators_so_a_hit_can_set_its_atime(kube, real_cluster, shared) -> None:
    """curvine-fuse v0.4.1 records a created file's owner by the caller's user *name* in its own container
    (crates/common/curvine-model/src/opts.rs, CreateFileOptsBuilder::acl: none when getpwuid finds none;
    a directory's falls back to the numeric UID), so every file a pod writes is stored without an owner
    and read as `[fuse] uid`, by default the FUSE process's: root. With default_permissions the kernel then
    refuses its creator any setattr, the hit recorder's atime included (EPERM). The chart sets `[fuse]
    uid/gid` to csi.volumeAccess's, the consumers' user: without it this test fails."""
    # The hit recorder's own set_atime (utimensat: atime now, mtime UTIME_OMIT), as the engines run it.
    check = """
import json, os
with open('/l2/owned', 'wb') as f:
    f.write(b'x')
before = os.stat('/l2/owned')
when = before.st_mtime_ns + 5 * 10**9
try:
    set_atime('/l2/owned', when)
    refused = None
except OSError as error:
    refused = error.errno
after = os.stat('/l2/owned')
print(json.dumps({'uid': before.st_uid, 'refused': refused,
                  'atime_moved': after.st_atime_ns // 10**6 == when // 10**6,
                  'mtime_kept': after.st_mtime_ns == before.st_mtime_ns}))
"""
    phase, log = run_pod(kube, real_cluster, shared, Path(l2_hits.__file__).read_text() + check)
    assert phase == "Succeeded", log
    seen = json.loads(log.strip().splitlines()[-1])
    assert seen == {"uid": RUN_AS, "refused": None, "atime_moved": True, "mtime_kept": True}, seen


@pytest.mark.usefixtures("chunk")
def test_an_upgrade_that_changes_the_config_rolls_the_servers_and_keeps_the_chunks(
    kube, curvine, shared
) -> None:
    ns = shared
    before = _pods(kube, curvine)
    curvine_release.helm_upgrade(kube, curvine, "--set", "config.logLevel=DEBUG")
    after = _pods(kube, curvine)
    for component in ("master", "worker"):
        assert after[component] != before[component], f"the {component} did not roll on a config change"
    # The node plugin's template carries no config checksum: an upgrade never cuts mounted volumes.
    assert after["csi-node"] == before["csi-node"], "the upgrade restarted the CSI node plugin"
    assert _read_back(kube, kube.cluster, ns)["sha256"] == EXPECTED_SHA256


def _pods(kube: Kube, installed: curvine_release.Installed) -> dict[str, list[str]]:
    selector = f"app.kubernetes.io/instance={installed.release}"
    items = json.loads(kube.kubectl("get", "pods", "-n", installed.namespace, "-l", selector, "-o", "json"))[
        "items"
    ]
    by: dict[str, list[str]] = {}
    for item in items:
        component = item["metadata"]["labels"].get("app.kubernetes.io/component", "")
        by.setdefault(component, []).append(item["metadata"]["uid"])
    return {component: sorted(uids) for component, uids in by.items()}


@pytest.mark.usefixtures("chunk")
@pytest.mark.parametrize("component", ["worker", "master"])
def test_a_restarted_server_pod_serves_the_chunks_again(kube, curvine, shared, component: str) -> None:
    ns = shared
    selector = f"app.kubernetes.io/instance={curvine.release},app.kubernetes.io/component={component}"
    kube.kubectl("delete", "pod", "-n", curvine.namespace, "-l", selector, "--wait=true")
    curvine_release.wait_ready(kube, curvine)
    assert _read_back(kube, kube.cluster, ns)["sha256"] == EXPECTED_SHA256


@pytest.mark.usefixtures("chunk")
def test_restarting_the_csi_node_plugin_cuts_mounted_pods_but_not_the_claim(kube, curvine, shared) -> None:
    """Upstream's warning, measured: curvine-fuse runs inside the node plugin, so its restart ends every
    FUSE mount of the node, and a pod that had the claim mounted gets ENOTCONN on every access (the kubelet
    does not publish a running pod's volume again). The next pod of the claim on that node reads it:
    curvine-csi v0.4.1 trusts a saved record of the dead FUSE client and publishes an empty root-owned
    folder instead (EACCES for the engines, every run until chart 0.3.7), unless it cannot save records,
    which the chart's default (csi.node.mountStateSecret false: no Role on Secrets) makes sure of
    (docs/curvine-fuse.md). The chart never restarts the plugin on upgrade (the upgrade test above)."""
    ns = shared
    holder, _ = run_pod(
        kube, kube.cluster, ns, "print(len(open('/l2/ns/chunk.data', 'rb').read()), flush=True)", keep=True
    )
    selector = f"app.kubernetes.io/instance={curvine.release},app.kubernetes.io/component=csi-node"
    kube.kubectl("delete", "pod", "-n", curvine.namespace, "-l", selector, "--wait=true")
    curvine_release.wait_ready(kube, curvine)
    probe = (
        "import os\ntry:\n os.stat('/l2/ns/chunk.data')\n print('ok')\nexcept OSError as e:\n print(e.errno)"
    )
    seen = kube.kubectl("exec", "-n", ns, holder, "--", "python3", "-c", probe).strip()
    assert seen == "107", f"a pod mounted across the plugin restart saw {seen!r}, expected ENOTCONN (107)"
    # The next pod starts while the old one may still hold the claim (its grace period): the kubelet then
    # skips staging and only publishes, the case the saved record broke.
    kube.kubectl("delete", "pod", "-n", ns, holder, "--wait=false")
    assert _read_back(kube, kube.cluster, ns)["sha256"] == EXPECTED_SHA256
    # A new claim of the class mounts too, and a chunk goes through it.
    fresh = f"{ns}-fresh"
    kube.kubectl("create", "namespace", fresh)
    _claim(kube, fresh)
    phase, log = run_pod(kube, kube.cluster, fresh, WRITER)
    assert phase == "Succeeded", log
    assert _read_back(kube, kube.cluster, fresh)["sha256"] == EXPECTED_SHA256
