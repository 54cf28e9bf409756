"""The umbrella's L2 eviction CronJob, as rendered for values/cpu.yaml, run by hand on the real node
(`kubectl create job --from=cronjob/...`): `l2_evict.py` from the chart's ConfigMap, in the image built here,
as the chart's non-root user, really deletes a dead namespace (one the chart's live list does not name) and
the oldest chunk files of a filled ReadWriteMany volume.

The volume is a hostPath PersistentVolume in the cluster's folder (Curvine cannot be built here). The
chunk files are sparse (their size is what the script measures), so "filling" 5 GiB costs no disk.
"""

from __future__ import annotations

import json
import os
import time

from kvtier.cluster.realnode import lifecycle as realnode

GiB = 2**30
CHUNK = GiB // 2  # ten of them fill the 5Gi claim of values/cpu.yaml
DEAD_NAMESPACE_DIR = "qwen2-05b.0123456789ab"  # an L2 namespace of a configuration no longer deployed
RUN_AS = 1000  # the eviction pod's runAsUser in the chart


def test_the_charts_eviction_job_deletes_the_oldest_chunks(
    kube, real_cluster, namespace, render_umbrella, hostpath_claim
) -> None:
    ns = namespace("evict")
    objects = render_umbrella(
        ns,
        ["l2-podscripts-configmap", "l2-eviction-configmap", "l2-eviction-cronjob"],
        {"cache.l2.eviction": real_cluster.images["python"]},
    )
    # The model's namespace directory, as the chart lists it live for the job (any other would be dead).
    live = next(o for o in objects if o["kind"] == "ConfigMap" and "live-namespaces.txt" in o.get("data", {}))
    (namespace_dir,) = live["data"]["live-namespaces.txt"].split()
    l2 = realnode.layout(real_cluster.name).root / "volumes" / ns
    chunks_dir = l2 / namespace_dir
    dead_dir = l2 / DEAD_NAMESPACE_DIR
    chunks_dir.mkdir(parents=True)
    dead_dir.mkdir()
    now = time.time()
    names = [f"chunk-{i:02d}.data" for i in range(10)]
    for age_rank, name in enumerate(names):  # chunk-00 is the oldest, all older than the minimum age
        chunk = chunks_dir / name
        with chunk.open("wb") as stream:
            stream.truncate(CHUNK)
        written = now - 3600 + age_rank * 60
        os.utime(chunk, (written, written))
    young = chunks_dir / "being-written.tmp"  # a temp file is never evicted
    young.write_bytes(b"x")
    stale = dead_dir / "chunk-old-config.data"  # a configuration no model runs, idle past the grace period
    stale.write_bytes(b"y")
    os.utime(stale, (now - 7200, now - 7200))
    for path in (l2, chunks_dir, dead_dir, *chunks_dir.iterdir(), stale):
        os.chown(path, RUN_AS, RUN_AS)

    cronjob = next(o for o in objects if o["kind"] == "CronJob")
    items = hostpath_claim(ns, "kv-l2", l2, "5Gi") + objects
    kube.kubectl(
        "apply", "-n", ns, "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )
    kube.kubectl("create", "job", "evict-now", "-n", ns, f"--from=cronjob/{cronjob['metadata']['name']}")
    kube.kubectl("wait", "-n", ns, "--for=condition=Complete", "job/evict-now", "--timeout=180s")

    report = json.loads(kube.kubectl("logs", "-n", ns, "job/evict-now"))
    left = sorted(p.name for p in chunks_dir.iterdir())
    # 10 x 0.5 GiB + the 1-byte temp file: above the 85% high watermark. The oldest chunks go until at
    # most 70% (3.5 GiB) is used; the temp file counts, so 3 removals leave one byte too many: 4 go.
    assert left == sorted([*names[4:], young.name]), report
    assert report["evicted_files"] == 4, report
    assert report["dead_files"] == 1 and not dead_dir.exists(), report
